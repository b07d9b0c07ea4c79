"""`gpuctl sched render`: what it prints (it applies nothing): the scheduler configuration,
or with --deploy every object that runs it as a second scheduler."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from gpuctl.common.errors import GpuctlError
from gpuctl.sched.core import profile, taints

if TYPE_CHECKING:
    from gpuctl.adapters.kube import Kube
    from gpuctl.sched import extender


def deployment(
    p: profile.Profile, image: str, extender_image: str | None = None
) -> list[dict[str, object]]:
    """ServiceAccount, RBAC, the ConfigMap holding the configuration, and the Deployment
    running kube-scheduler from `image` (and the extender from `extender_image`)."""
    config = profile.config_text(profile.scheduler_config(p))
    return profile.deploy_objects(p, image, config, extender_image)


def taint_warning(kube: Kube | None) -> str | None:
    """What the GPU nodes' taints mean for a second scheduler: read from the cluster, or
    (kube None) what is assumed without one."""
    if kube is None:
        return taints.ASSUMED
    return taints.warning(kube.list_objects("Node"))


def serve_extender(
    connect: Callable[[], Kube],
    host: str,
    port: int,
    label_key: str,
    log: extender.Log,
) -> None:
    """`gpuctl sched extender` until interrupted: the HTTP server here, bound first (an
    address it cannot listen on stops it before it reads the cluster), then the watches in
    a thread."""
    import threading

    from gpuctl.sched import extender
    from gpuctl.sched.core.extender import ClusterView

    state = extender.Extender(ClusterView(label_key), log)
    http = extender.server(state, host, port)
    stop = threading.Event()
    watcher = threading.Thread(
        target=extender.keep_in_sync, args=(state, connect, stop), daemon=True
    )
    log.info(f"serving on {extender.url(host, http.server_address[1])}")
    watcher.start()
    try:
        http.serve_forever()
    finally:
        stop.set()
        http.server_close()


def cluster_image(connect: Callable[[], Kube]) -> str:
    """The kube-scheduler image of the cluster's own version, read from its /version."""
    try:
        with connect() as kube:
            version, host = kube.server_version(), kube.host
    except GpuctlError as e:
        offline = "or give --kube-version vX.Y.Z to render without a cluster"
        raise type(e)(e.message, hint=f"{e.hint}; {offline}" if e.hint else offline) from None
    return profile.image(version, f"the version of {host}")
