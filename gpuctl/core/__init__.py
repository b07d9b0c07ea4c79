"""Pure core: specs, rendering, planning, aggregation. No network, clock or environment."""
