"""DCGM vocabulary every GPU view shares: dcgm-exporter metric names, identity labels, who holds a GPU, and the one busy-signal rule. Pure."""
