"""The vocabulary of gputui: frozen, slotted dataclasses shared by every layer.

``gpu`` (NVML's answers), ``processes``, ``containers``, ``status`` (health, findings and
source states), ``snapshot`` (one refresh joined), ``gauges`` (the GPU field table every
output is generated from), ``mig`` (MIG device names and tokens) and ``settings`` (what one run
was asked to do). No third-party imports.
"""
