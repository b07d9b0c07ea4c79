"""`gpuctl nodes`: the accelerators each node offers, of every vendor and source."""
