"""MIG layouts: validation against real geometry, planning, apply on a node or a cluster (`mig`)."""
