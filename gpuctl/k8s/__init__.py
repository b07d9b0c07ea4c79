"""Kubernetes vocabulary every capability shares: node and pod accessors, the one GPU-node rule, the labels gpuctl manages, API groups. Pure."""
