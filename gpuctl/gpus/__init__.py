"""What several capabilities know about GPUs: MIG geometry, GPU samples, GPU resources of pods."""
