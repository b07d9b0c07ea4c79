"""report: per-team GPU showback (held vs busy GPU-hours, idle-held hours, cost) from DCGM history."""
