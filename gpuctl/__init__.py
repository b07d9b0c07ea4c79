"""gpuctl: provision, schedule, watch and partition GPU clusters."""

__version__ = "0.1.0"
