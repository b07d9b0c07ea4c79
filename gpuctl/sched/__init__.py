"""`gpuctl sched`: a kube-scheduler profile that packs GPU pods, and what runs it."""
