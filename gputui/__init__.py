"""gputui: who is using my NVIDIA GPUs, in which Docker container, and is the runtime healthy."""

__version__ = "0.1.0"
