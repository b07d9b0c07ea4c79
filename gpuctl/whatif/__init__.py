"""`gpuctl whatif`: replay a workload onto a cluster's nodes under several scheduling policies
and measure how much of the GPU capacity each one can allocate (the FGD paper's method)."""
