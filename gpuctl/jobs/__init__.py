"""Job specs rendered into Pods/Jobs, fit-checked, submitted and followed (`render`, `submit`, `jobs`)."""
