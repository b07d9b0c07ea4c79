"""GPU views: a node from NVML, a cluster from DCGM metrics in Prometheus, alert rules (`top`, `alerts`)."""
