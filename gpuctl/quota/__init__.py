"""Per-team GPU quotas (`quota`)."""
