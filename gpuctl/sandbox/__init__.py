"""`gpuctl sandbox`: a local simulated GPU cluster (gpuctl.sim.sandbox) to try gpuctl on."""
