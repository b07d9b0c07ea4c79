"""`gpuctl advise`: rightsizing advice per workload from its GPUs' use over a window."""
