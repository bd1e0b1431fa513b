"""NVML adapter: the only importer of pynvml, and its slow lane for the expensive reads."""
