"""What a `kind: Service` spec adds to a job spec: the ports it serves, its replicas, its
probes and its autoscaling on one signal. Pure; gpuctl.jobs.core.spec reads the rest.

A service's pods are a Deployment's, named `<name>-<pod-template-hash>-<5 characters>`;
its autoscaler's queries find them by that name, so the name must leave room for both
(63 characters in all, the API server truncates longer ones)."""

from __future__ import annotations

from dataclasses import dataclass

from gpuctl.common import k8s_names
from gpuctl.common.errors import UsageError, carries_credentials
from gpuctl.common.spec_fields import (
    DURATION,
    INTEGER,
    MAPPING,
    MAPPINGS,
    NAME,
    TEXT,
    Field,
    Rule,
    Table,
)
from gpuctl.common.specfile import MAX_SECONDS, Fields
from gpuctl.dcgm.promql import duration_seconds

MAX_REPLICAS = 1000
# A Deployment's pod: the name, "-", the pod-template-hash (up to 10 characters), "-", and
# 5 random characters.
MAX_NAME = 63 - 1 - 10 - 1 - 5
SIGNALS = ("gpu_busy", "queue_depth", "latency_ms", "rps")
SIGNAL_HELP = {
    "gpu_busy": "Target mean GPU busy percent of the service's pods (DCGM).",
    "queue_depth": "Target requests waiting per replica (the batcher's queue).",
    "latency_ms": "Target mean request latency in ms (the batcher's queued -> result).",
    "rps": "Target requests per second per replica (the batcher's).",
}
DEFAULT_WINDOW = "2m"

PROBE = Table(
    Field("path", TEXT, "HTTP GET this path (e.g. /healthz); without it, a TCP connect."),
    Field("port", INTEGER, "The port to probe (default: the first port).", minimum=1,
          maximum=65535),
    Field("initial_delay", DURATION, "Wait this long after the container starts (a model "
          "that loads for minutes needs it)."),
    Field("period", DURATION, "How often to probe (default 10s)."),
    Field("timeout", DURATION, "How long one probe may take (default 1s)."),
    Field("failure_threshold", INTEGER, "Failures in a row before it counts (default 3).",
          minimum=1, maximum=1000),
)  # fmt: skip
PORT = Table(
    Field("name", NAME, "The port's name (an IANA service name: e.g. http, grpc).",
          required=True, maximum=15),
    Field("port", INTEGER, "The container's port, also the Service's.", required=True,
          minimum=1, maximum=65535),
)  # fmt: skip
AUTH_MODES = ("basic", "bearer")  # KEDA's prometheus scaler's authModes gpuctl renders
PROMETHEUS_AUTH = Table(
    Field("secret", TEXT, "A Secret in the service's namespace with the credentials: keys "
          "username and password (basic), or bearerToken (bearer).", required=True,
          pattern=Rule(k8s_names.DNS1123_SUBDOMAIN, "a valid Secret name")),
    Field("mode", TEXT, "basic or bearer.", default="basic", choices=AUTH_MODES),
)  # fmt: skip
AUTOSCALE = Table(
    Field("min", INTEGER, "Fewest replicas; 0 (scale to zero) only with KEDA.", default=1,
          minimum=0, maximum=MAX_REPLICAS),
    Field("max", INTEGER, "Most replicas.", required=True, minimum=1, maximum=MAX_REPLICAS),
    *(Field(s, INTEGER, SIGNAL_HELP[s], minimum=1, maximum=1_000_000) for s in SIGNALS),
    Field("window", TEXT, "The Prometheus range the signal is averaged over.",
          default=DEFAULT_WINDOW),
    Field("prometheus", TEXT, "KEDA: the Prometheus URL it queries from inside the cluster "
          "(default: the Prometheus Operator's prometheus-operated in namespace monitoring), "
          "without credentials: those go in prometheus_auth's Secret.",
          pattern=Rule(r"https?://[^\s]+", "an http(s) URL")),
    Field("prometheus_auth", MAPPING, "KEDA: how it logs in to that Prometheus, from a Secret "
          "(a TriggerAuthentication is rendered beside the ScaledObject).",
          fields=PROMETHEUS_AUTH),
)  # fmt: skip
SERVICE = Table(
    Field("port", INTEGER, "The port the server listens on (or ports).", minimum=1,
          maximum=65535),
    Field("ports", MAPPINGS, "Named ports, instead of port.", fields=PORT),
    Field("replicas", INTEGER, "Replicas (with autoscale: the first count).", default=1,
          minimum=0, maximum=MAX_REPLICAS),
    Field("metrics_port", INTEGER, "Where the server exports its metrics (/metrics, e.g. "
          "gpuctl.batching.prometheus); annotates the pods for scraping.", minimum=1,
          maximum=65535),
    Field("readiness", MAPPING, "The readiness probe (default: a TCP connect to the first "
          "port); a rollout waits for it.", fields=PROBE),
    Field("liveness", MAPPING, "The liveness probe (default: none).", fields=PROBE),
    Field("autoscale", MAPPING, "min, max and a target on one signal: gpu_busy, "
          "queue_depth, latency_ms or rps.", fields=AUTOSCALE),
)  # fmt: skip
SERVICE_ONLY = SERVICE.names()
# job fields a service has no use for
JOB_ONLY = (
    "nodes", "nproc_per_node", "master_port", "ttl_after_finished", "deadline", "retries",
    "queue", "multinode", "compute_domain",
)  # fmt: skip


@dataclass(frozen=True)
class Probe:
    port: int
    path: str | None = None
    initial_delay: int | None = None
    period: int | None = None
    timeout: int | None = None
    failure_threshold: int | None = None


@dataclass(frozen=True)
class PrometheusAuth:
    """KEDA's login to Prometheus: a Secret's keys, by authMode."""

    secret: str
    mode: str = "basic"


@dataclass(frozen=True)
class Autoscale:
    min: int
    max: int
    signal: str  # one of SIGNALS
    target: int
    window: str = DEFAULT_WINDOW
    prometheus: str | None = None
    auth: PrometheusAuth | None = None


@dataclass(frozen=True)
class Serving:
    ports: tuple[tuple[str, int], ...]  # (name, port)
    replicas: int = 1
    metrics_port: int | None = None
    readiness: Probe | None = None
    liveness: Probe | None = None
    autoscale: Autoscale | None = None

    @property
    def initial_replicas(self) -> int:
        """Replicas at creation: the spec's, within the autoscaler's bounds."""
        a = self.autoscale
        return self.replicas if a is None else min(max(self.replicas, a.min), a.max)

    @property
    def peak_replicas(self) -> int:
        return self.replicas if self.autoscale is None else max(self.autoscale.max, self.replicas)


def parse(f: Fields, name: str) -> Serving:
    """The service parts of the spec F (kind Service), named NAME."""
    for key in JOB_ONLY:
        if f.has(key):
            raise f.error(key, "applies to kind Job only, not to a Service")
    if not k8s_names.dns1035_label(name):
        raise f.error("name", "a Service's name must start with a letter (a DNS-1035 label)")
    if len(name) > MAX_NAME:
        raise f.error(
            "name",
            f"too long for a Service: at most {MAX_NAME} characters, so that its pods' names "
            "(name-<hash>-<5 characters>) fit in 63 and its autoscaler can find them",
        )
    ports = _ports(f)
    if not ports:
        raise f.error(None, "a Service serves on a port: give port (or ports)")
    first = ports[0][1]
    metrics_port = f.read(SERVICE["metrics_port"])
    readiness = _probe(f, "readiness", first) or Probe(port=first)
    autoscale = _autoscale(f)
    return Serving(
        ports=ports,
        replicas=f.read(SERVICE["replicas"]),
        metrics_port=metrics_port,
        readiness=readiness,
        liveness=_probe(f, "liveness", first),
        autoscale=autoscale,
    )


def refuse_service_fields(f: Fields, kind: str) -> None:
    """A Job or Pod spec with a field only a Service has."""
    for key in SERVICE_ONLY:
        if f.has(key):
            raise f.error(key, f"applies to kind Service only, not to a {kind}")


def _ports(f: Fields) -> tuple[tuple[str, int], ...]:
    if f.has("port") and f.has("ports"):
        raise f.error("ports", "give either port or ports, not both")
    if f.has("port"):
        return (("http", f.read(SERVICE["port"])),)
    out: list[tuple[str, int]] = []
    for p in f.list_of_maps("ports"):
        p.reject_unknown(PORT)
        entry = (p.read(PORT["name"]), p.read(PORT["port"]))
        if any(entry[0] == n for n, _ in out) or any(entry[1] == n for _, n in out):
            raise p.error(None, f"port {entry[0]} ({entry[1]}) is given twice")
        out.append(entry)
    return tuple(out)


def _probe(f: Fields, key: str, first_port: int) -> Probe | None:
    p = f.child(key)
    if p is None:
        return None
    p.reject_unknown(PROBE)
    port = p.read(PROBE["port"], first_port)
    path = p.read(PROBE["path"])
    if path is not None and not path.startswith("/"):
        raise p.error("path", f"{path!r} is not an absolute path (e.g. /healthz)")
    return Probe(
        port=port,
        path=path,
        initial_delay=p.read(PROBE["initial_delay"]),
        period=p.read(PROBE["period"]),
        timeout=p.read(PROBE["timeout"]),
        failure_threshold=p.read(PROBE["failure_threshold"]),
    )


def _autoscale(f: Fields) -> Autoscale | None:
    a = f.child("autoscale")
    if a is None:
        return None
    a.reject_unknown(AUTOSCALE)
    low, high = a.read(AUTOSCALE["min"]), a.read(AUTOSCALE["max"])
    if low > high:
        raise a.error("min", f"{low} is more than max ({high})")
    given = [s for s in SIGNALS if a.has(s)]
    if len(given) != 1:
        raise a.error(
            given[1] if given else None,
            "give one signal to scale on: " + ", ".join(SIGNALS),
        )
    signal = given[0]
    target = a.read(AUTOSCALE[signal])
    if signal == "gpu_busy" and target > 100:
        raise a.error(signal, f"{target} is not a percentage (1..100)")
    if signal == "gpu_busy" and low == 0:
        raise a.error(
            "min",
            "a service at 0 replicas holds no GPU, so gpu_busy could never wake it",
            hint="min: 1, or scale on queue_depth, latency_ms or rps",
        )
    window = a.read(AUTOSCALE["window"])
    try:
        if duration_seconds(window, "window") > MAX_SECONDS:
            raise a.error("window", f"{window!r} is longer than Prometheus keeps anything")
    except UsageError as e:
        raise a.error("window", e.message.removeprefix("window: "), e.hint) from None
    url = a.read(AUTOSCALE["prometheus"])
    if url is not None and carries_credentials(url):
        raise a.error(
            "prometheus",
            "the URL carries credentials, which would be written in clear into the ScaledObject",
            hint="put them in a Secret and name it in autoscale.prometheus_auth "
            "(docs/services.md#a-prometheus-that-asks-for-credentials)",
        )
    return Autoscale(low, high, signal, target, window, url, _auth(a))


def _auth(a: Fields) -> PrometheusAuth | None:
    f = a.child("prometheus_auth")
    if f is None:
        return None
    f.reject_unknown(PROMETHEUS_AUTH)
    return PrometheusAuth(f.read(PROMETHEUS_AUTH["secret"]), f.read(PROMETHEUS_AUTH["mode"]))
