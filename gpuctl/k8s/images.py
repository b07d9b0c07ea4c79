"""The image gpuctl's in-cluster parts run from (the scheduler extender beside
kube-scheduler, the reclaim CronJob or Deployment), as `make image` builds it from
Containerfile: IMAGE in the Makefile, tagged with the package's version. gpuctl publishes
no image; `localhost/` is where podman keeps a local build, so the default never pulls
someone else's image (docs/image.md: push it to your registry and pass --image). Pure."""

from __future__ import annotations

from gpuctl import __version__

REPOSITORY = "localhost/gpuctl"  # the Makefile's IMAGE (tests/test_image.py checks)
DEFAULT = f"{REPOSITORY}:{__version__}"
