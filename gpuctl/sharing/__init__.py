"""GPU time-slicing and MPS through the device plugin's config (`share`)."""
