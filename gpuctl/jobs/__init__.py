"""Job specs rendered into Pods and Jobs, fit-checked, submitted and followed
(`render`, `submit`, `jobs`)."""
