"""Real stand-ins for outside systems, started for tests (see ../shared/reference/TEST-STANDINS.md)."""
