"""One thin adapter per outside system; heavy libraries are imported inside functions."""
