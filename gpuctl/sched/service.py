"""`gpuctl sched render`: what it prints (it applies nothing): the scheduler configuration,
or with --deploy every object that runs it as a second scheduler."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from gpuctl.common.errors import GpuctlError
from gpuctl.sched.core import profile

if TYPE_CHECKING:
    from gpuctl.adapters.kube import Kube


def configuration(p: profile.Profile) -> dict[str, object]:
    return profile.scheduler_config(p)


def deployment(p: profile.Profile, image: str) -> list[dict[str, object]]:
    """ServiceAccount, RBAC, the ConfigMap holding the configuration, and the Deployment
    running kube-scheduler from `image`."""
    return profile.deploy_objects(p, image, profile.config_text(profile.scheduler_config(p)))


def cluster_image(connect: Callable[[], Kube]) -> str:
    """The kube-scheduler image of the cluster's own version, read from its /version."""
    try:
        with connect() as kube:
            version, host = kube.server_version(), kube.host
    except GpuctlError as e:
        offline = "or give --kube-version vX.Y.Z to render without a cluster"
        raise type(e)(e.message, hint=f"{e.hint}; {offline}" if e.hint else offline) from None
    return profile.image(version, f"the version of {host}")
