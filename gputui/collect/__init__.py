"""The data layer: talks to NVML, Docker and /proc; never imports Textual or Rich."""
