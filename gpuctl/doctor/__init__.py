"""Cluster readiness checks (`doctor`)."""
