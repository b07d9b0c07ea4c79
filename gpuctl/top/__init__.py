"""GPU views: a node from NVML, a cluster from DCGM metrics in Prometheus, and alert rules
(`top`, `alerts`)."""
