"""The pure part of `gpuctl report`: PromQL out, figures in."""
