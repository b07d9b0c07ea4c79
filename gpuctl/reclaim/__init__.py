"""reclaim: give idle-held GPUs back by policy; make-room: the fewest evictions for a waiting job."""
