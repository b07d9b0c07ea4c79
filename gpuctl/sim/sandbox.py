"""The process behind `gpuctl sandbox start`: a simulated GPU cluster for trying gpuctl.

It runs the Kubernetes API emulator the tests use (gpuctl.sim.kube: kmock, serving the
JobSet CRD and, with --kueue, Kueue's), seeds it with GPU nodes as the GPU Operator labels
them (gpuctl.sim.cluster) and the GPU Operator's DaemonSets, and runs a simulated control
plane every second:

- the Job controller makes a Job's pods (one per completion index of an Indexed Job) and
  counts them into the Job's status (Complete, Failed, DeadlineExceeded); the JobSet
  controller makes each replicated Job's Jobs and reports them; objects whose owner was
  deleted are deleted (garbage collection); a suspended Job (Kueue's) waits: Kueue's own
  controller is not simulated;
- the scheduler places pending pods (gpuctl.sim.cluster.place) or writes why not;
- the kubelet runs a placed pod for `gpuctl.io/sandbox-runtime` seconds (default 300)
  and ends it Succeeded, or Failed with `gpuctl.io/sandbox-outcome: fail`; past its Job's
  activeDeadlineSeconds (a spec's `deadline:`) it is Failed with DeadlineExceeded;
- one dcgm-exporter per GPU node serves the GPUs' series with the pods that hold them
  (util from `gpuctl.io/sandbox-gpu-util`, else a busy figure), and, when a `prometheus`
  executable is found, a Prometheus scrapes them as the GPU Operator's ServiceMonitor does.

Each `gpuctl.io/sandbox-*` setting is read from the pod's annotations (copied from its Job's),
else from its first container's environment as SANDBOX_RUNTIME, SANDBOX_OUTCOME and
SANDBOX_GPU_UTIL (a job spec's `env:`). None of it is a real cluster: it exists for demos and for trying the tool.
State: STATE_DIR/sandbox.json (written once ready), kubeconfig, prometheus/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
import zlib

from gpuctl.gpus import dra, geometry
from gpuctl.gpus.dra import DraView
from gpuctl.k8s import claims
from gpuctl.k8s.claims import ClaimRequest
from gpuctl.k8s.times import seconds, timestamp
from gpuctl.sim import cluster, dcgm_exporter, dra_driver
from gpuctl.sim.kube import KubeEmulator

RUNTIME = "gpuctl.io/sandbox-runtime"
OUTCOME = "gpuctl.io/sandbox-outcome"
GPU_UTIL = "gpuctl.io/sandbox-gpu-util"
DEFAULT_RUNTIME_S = 300
JOB_NAME = "batch.kubernetes.io/job-name"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
MADE_BY = "gpuctl.io/sandbox-made-by"  # owner kind/namespace/name of what the simulation made


def now_text() -> str:
    return timestamp(time.time())


def _seconds(text: str | None) -> float:
    try:
        return max(float(text), 0.0) if text is not None else float("nan")
    except ValueError:
        return float("nan")


class Api:
    """JSON over HTTP to the emulator (as any client would)."""

    def __init__(self, url: str):
        self.url = url

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        ctype = "application/merge-patch+json" if method == "PATCH" else "application/json"
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": ctype}
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            if e.code in (404, 409):
                return {}
            raise

    def items(self, path: str) -> list[dict]:
        """The list's objects, each with its kind (a built-in list's items carry none)."""
        answer = self._call("GET", path)
        kind = str(answer.get("kind") or "").removesuffix("List")
        return [{"kind": kind, **item} for item in answer.get("items") or []]

    def create(self, path: str, obj: dict) -> None:
        self._call("POST", path, obj)

    def patch(self, path: str, patch: dict) -> None:
        self._call("PATCH", path, patch)

    def delete(self, path: str) -> None:
        self._call("DELETE", path)


def _meta(obj: dict) -> dict:
    return obj.setdefault("metadata", {})


def _ns_path(group: str, ns: str, plural: str, name: str = "") -> str:
    base = "/api/v1" if group == "v1" else f"/apis/{group}"
    return f"{base}/namespaces/{ns}/{plural}" + (f"/{name}" if name else "")


JOBS, JOBSETS, PODS = "batch/v1", "jobset.x-k8s.io/v1alpha2", "v1"


class Simulation:
    """The simulated control plane and kubelets, one step a tick."""

    def __init__(self, api: Api, nodes: list[dict]):
        self.api, self.nodes = api, nodes
        self._dra: DraView | None = None  # the cluster's DRA, read when a claim needs it
        self.started: dict[tuple[str, str], float] = {}  # pod -> when it started running
        self.gpus: dict[tuple[str, str], list[int]] = {}  # pod -> GPU indices on its node

    def step(self) -> None:
        jobsets = self.api.items("/apis/jobset.x-k8s.io/v1alpha2/jobsets")
        jobs = self.api.items("/apis/batch/v1/jobs")
        pods = self.api.items("/api/v1/pods")
        self._dra = None  # read again when a pod's claims are allocated this tick
        self._collect(jobsets, jobs, pods)
        for js in jobsets:
            self._jobset(js, jobs)
        for job in jobs:
            self._job(job, pods)
        self._pods(pods)

    # -- garbage collection --------------------------------------------------------------

    def _collect(self, jobsets: list[dict], jobs: list[dict], pods: list[dict]) -> None:
        alive = {
            f"{o.get('kind')}/{_meta(o).get('namespace')}/{_meta(o).get('name')}"
            for o in jobsets + jobs
        }
        for obj, group, plural in [(j, JOBS, "jobs") for j in jobs] + [
            (p, PODS, "pods") for p in pods
        ]:
            owner = (_meta(obj).get("annotations") or {}).get(MADE_BY)
            if owner and owner not in alive:
                m = _meta(obj)
                self.api.delete(_ns_path(group, m["namespace"], plural, m["name"]))
                self.started.pop((m["namespace"], m["name"]), None)

    # -- JobSet and Job controllers --------------------------------------------------------

    def _jobset(self, js: dict, jobs: list[dict]) -> None:
        m, spec = _meta(js), js.get("spec") or {}
        ns, name = m["namespace"], m["name"]
        mine = [j for j in jobs if (_meta(j).get("labels") or {}).get(JOBSET_NAME) == name]
        statuses, done, failed = [], True, False
        for rj in spec.get("replicatedJobs") or []:
            counts = dict.fromkeys(("ready", "succeeded", "failed", "active", "suspended"), 0)
            for i in range(int(rj.get("replicas") or 1)):
                job_name = f"{name}-{rj['name']}-{i}"
                job = next((j for j in mine if _meta(j).get("name") == job_name), None)
                if job is None:
                    self._make_job(js, rj, job_name, i)
                    done = False
                    continue
                state = _finished(job)
                counts["succeeded" if state == "Complete" else "failed" if state else "active"] += 1
                job_status, job_spec = job.get("status") or {}, job.get("spec") or {}
                done_or_ready = int(job_status.get("ready") or 0) + int(
                    job_status.get("succeeded") or 0
                )
                if not state and done_or_ready >= int(job_spec.get("parallelism") or 1):
                    counts["ready"] += 1
                done, failed = done and state == "Complete", failed or state == "Failed"
            statuses.append({"name": rj["name"], **counts})
        status: dict = {"replicatedJobsStatus": statuses}
        if (done or failed) and not _finished(js):
            kind = "Completed" if done else "Failed"
            status["conditions"] = [_condition(kind, kind, f"jobset {kind.lower()}")]
            status["terminalState"] = kind
        self.api.patch(_ns_path(JOBSETS, ns, "jobsets", name) + "/status", {"status": status})

    def _make_job(self, js: dict, rj: dict, job_name: str, index: int) -> None:
        m = _meta(js)
        template = json.loads(json.dumps(rj.get("template") or {}))
        labels = {
            **((template.get("metadata") or {}).get("labels") or {}),
            JOBSET_NAME: m["name"],
            "jobset.sigs.k8s.io/replicatedjob-name": rj["name"],
            "jobset.sigs.k8s.io/job-index": str(index),
        }
        pod_meta = template.setdefault("spec", {}).setdefault("template", {})
        pod_meta.setdefault("metadata", {}).setdefault("labels", {}).update(labels)
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": job_name,
                "namespace": m["namespace"],
                "labels": labels,
                "annotations": {MADE_BY: f"JobSet/{m['namespace']}/{m['name']}"},
                "creationTimestamp": now_text(),
            },
            "spec": template["spec"],
        }
        self.api.create(_ns_path(JOBS, m["namespace"], "jobs"), job)

    def _job(self, job: dict, pods: list[dict]) -> None:
        m, spec = _meta(job), job.get("spec") or {}
        ns, name = m["namespace"], m["name"]
        if spec.get("suspend") or _finished(job):
            return
        mine = [
            p
            for p in pods
            if _meta(p).get("namespace") == ns
            and (_meta(p).get("labels") or {}).get(JOB_NAME) == name
        ]
        phases = [(p.get("status") or {}).get("phase") for p in mine]
        succeeded, failed = phases.count("Succeeded"), phases.count("Failed")
        active = len(mine) - succeeded - failed
        completions = int(spec.get("completions") or 1)
        indexed = spec.get("completionMode") == "Indexed"
        if active + succeeded < completions and failed <= int(spec.get("backoffLimit", 6)):
            wanted = min(int(spec.get("parallelism") or 1), completions - succeeded) - active
            taken = {(_meta(p).get("annotations") or {}).get(_INDEX) for p in mine}
            free = [i for i in range(completions) if str(i) not in taken] if indexed else []
            for k in range(max(wanted, 0)):
                self._make_pod(job, free[k] if indexed and k < len(free) else None, len(mine) + k)
        ready = phases.count("Running")
        status: dict = {"active": active, "ready": ready, "succeeded": succeeded, "failed": failed}
        status.setdefault("startTime", (job.get("status") or {}).get("startTime") or now_text())
        deadline = spec.get("activeDeadlineSeconds")
        started = seconds(status["startTime"])
        if succeeded >= completions:
            status["conditions"] = [
                _condition(
                    "SuccessCriteriaMet", "CompletionsReached", "Reached expected completions"
                ),
                _condition("Complete", "CompletionsReached", "Reached expected completions"),
            ]
            status["completionTime"] = now_text()
        elif failed > int(spec.get("backoffLimit", 6)):
            status["conditions"] = [
                _condition(
                    "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"
                )
            ]
        elif deadline and started and time.time() - started > int(deadline):
            status["conditions"] = [
                _condition(
                    "Failed", "DeadlineExceeded", "Job was active longer than specified deadline"
                )
            ]
            for p in mine:
                if (p.get("status") or {}).get("phase") not in cluster.DONE:
                    self._end(p, "Failed", "DeadlineExceeded")
        self.api.patch(_ns_path(JOBS, ns, "jobs", name) + "/status", {"status": status})

    def _make_pod(self, job: dict, index: int | None, serial: int) -> None:
        m = _meta(job)
        template = json.loads(json.dumps((job.get("spec") or {}).get("template") or {}))
        meta = template.setdefault("metadata", {})
        seed = f"{m['name']}/{serial}/{time.time()}".encode()
        suffix = f"{zlib.crc32(seed) % 100000:05d}"
        name = f"{m['name']}-{index}-{suffix}" if index is not None else f"{m['name']}-{suffix}"
        meta.update(name=name, namespace=m["namespace"], creationTimestamp=now_text())
        labels = meta.setdefault("labels", {})
        labels |= {JOB_NAME: m["name"], "job-name": m["name"]}
        annotations = meta.setdefault("annotations", {})
        annotations[MADE_BY] = f"Job/{m['namespace']}/{m['name']}"
        for key in (RUNTIME, OUTCOME, GPU_UTIL):
            if key in (m.get("annotations") or {}):
                annotations.setdefault(key, m["annotations"][key])
        if index is not None:
            annotations[_INDEX] = str(index)
            labels[_INDEX] = str(index)
            template.setdefault("spec", {}).setdefault("hostname", f"{m['name']}-{index}")
        pod = {"apiVersion": "v1", "kind": "Pod", **template, "status": {"phase": "Pending"}}
        self.api.create(_ns_path(PODS, m["namespace"], "pods"), pod)

    # -- scheduler and kubelet -------------------------------------------------------------

    def _pods(self, pods: list[dict]) -> None:
        placed = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
        for pod in sorted(pods, key=lambda p: _meta(p).get("creationTimestamp") or ""):
            m, status = _meta(pod), pod.get("status") or {}
            key = (m["namespace"], m["name"])
            if status.get("phase") in cluster.DONE:
                self.gpus.pop(key, None)
            elif not (pod.get("spec") or {}).get("nodeName"):
                self._schedule(pod, placed)
            elif key in self.started and time.time() - self.started[key] >= _runtime(pod):
                fail = _setting(pod, OUTCOME) == "fail"
                self._end(pod, "Failed" if fail else "Succeeded", "Error" if fail else "Completed")
            elif key not in self.started:
                self._run(pod, placed)

    def _schedule(self, pod: dict, placed: list[dict]) -> None:
        m = _meta(pod)
        claim = self._claim_of(pod)
        view = self._view() if claim is not None else None
        claimable = None
        if claim is not None and view is not None:
            claimable = lambda name: dra_driver.allocate(view, claim[1], name) is not None  # noqa: E731
        node, why = cluster.place(pod, self.nodes, placed, claimable)
        path = _ns_path(PODS, m["namespace"], "pods", m["name"])
        if node is None:
            cond = _condition("PodScheduled", "Unschedulable", why, status="False")
            old = [
                c
                for c in (pod.get("status") or {}).get("conditions") or []
                if c.get("type") == "PodScheduled"
            ]
            if not old or old[0].get("message") != why:
                self.api.patch(
                    path + "/status", {"status": {"phase": "Pending", "conditions": [cond]}}
                )
            return
        if claim is not None and view is not None:
            self._allocate(pod, claim, view, node)
        self.api.patch(path, {"spec": {"nodeName": node}})
        pod.setdefault("spec", {})["nodeName"] = node
        placed.append(pod)
        self._run(pod, placed)

    # -- DRA: kube-scheduler's dynamicresources plugin and the resource claim controller --

    def _view(self) -> DraView:
        if self._dra is None:
            base = f"/apis/{dra_driver.API_VERSION}"
            self._dra = dra.view(
                self.api.items(f"{base}/deviceclasses"),
                self.api.items(f"{base}/resourceslices"),
                self.api.items(f"{base}/resourceclaims"),
            )
        return self._dra

    def _claim_of(self, pod: dict) -> tuple[str, ClaimRequest] | None:
        """The pod's claim (made from its first ResourceClaimTemplate) and its request."""
        names = claims.template_names(pod.get("spec") or {})
        if not names:
            return None
        ns = _meta(pod)["namespace"]
        path = f"/apis/{dra_driver.API_VERSION}/namespaces/{ns}/resourceclaimtemplates/{names[0]}"
        request = claims.from_template(self.api._call("GET", path))
        return (names[0], request) if request is not None else None

    def _allocate(
        self, pod: dict, claim: tuple[str, ClaimRequest], view: DraView, node: str
    ) -> None:
        """Make the pod's claim from its template, allocated on NODE and reserved for it."""
        m = _meta(pod)
        results = dra_driver.allocate(view, claim[1], node) or []
        name = f"{m['name']}-{claims.CLAIM}"
        base = f"/apis/{dra_driver.API_VERSION}/namespaces/{m['namespace']}/resourceclaims"
        template = self.api._call("GET", base.replace("resourceclaims", "resourceclaimtemplates") + f"/{claim[0]}")  # fmt: skip
        owner = {"apiVersion": "v1", "kind": "Pod", "name": m["name"], "uid": m.get("uid", ""), "controller": True}  # fmt: skip
        self.api.create(base, {
            "apiVersion": dra_driver.API_VERSION, "kind": "ResourceClaim",
            "metadata": {"name": name, "annotations": {dra.POD_CLAIM_NAME: claims.CLAIM}, "ownerReferences": [owner]},
            "spec": (template.get("spec") or {}).get("spec") or {},
        })  # fmt: skip
        self.api.patch(f"{base}/{name}/status", {"status": {
            "allocation": {"devices": {"results": results}, "nodeSelector": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
            "reservedFor": [{"resource": "pods", "name": m["name"], "uid": m.get("uid", "")}],
        }})  # fmt: skip
        self.api.patch(
            _ns_path(PODS, m["namespace"], "pods", m["name"]) + "/status",
            {
                "status": {
                    "resourceClaimStatuses": [{"name": claims.CLAIM, "resourceClaimName": name}]
                }
            },
        )
        self._dra = None  # the devices it took are no longer free

    def _release(self, pod: dict) -> None:
        """A finished pod's claim made from a template goes (the resource claim controller)."""
        if claims.template_names(pod.get("spec") or {}):
            m = _meta(pod)
            base = f"/apis/{dra_driver.API_VERSION}/namespaces/{m['namespace']}/resourceclaims"
            self.api.delete(f"{base}/{m['name']}-{claims.CLAIM}")

    def _run(self, pod: dict, placed: list[dict]) -> None:
        m, node = _meta(pod), pod["spec"]["nodeName"]
        key = (m["namespace"], m["name"])
        taken = {
            i
            for k, v in self.gpus.items()
            if k != key and self._node_of(k, placed) == node
            for i in v
        }
        want = cluster.pod_gpus(pod)
        self.gpus[key] = [i for i in range(10_000) if i not in taken][:want]
        self.started[key] = time.time()
        running = [
            {
                "name": c.get("name"),
                "ready": True,
                "restartCount": 0,
                "image": c.get("image"),
                "state": {"running": {"startedAt": now_text()}},
            }
            for c in (pod.get("spec") or {}).get("containers") or []
        ]
        status = {
            "phase": "Running",
            "startTime": now_text(),
            "hostIP": "10.0.0.1",
            "podIP": f"10.1.{zlib.crc32(m['name'].encode()) % 250}.{len(placed) % 250 + 1}",
            "conditions": [_condition("PodScheduled", None, None), _condition("Ready", None, None)],
            "containerStatuses": running,
        }
        self.api.patch(
            _ns_path(PODS, m["namespace"], "pods", m["name"]) + "/status", {"status": status}
        )
        pod["status"] = status

    @staticmethod
    def _node_of(key: tuple[str, str], placed: list[dict]) -> str | None:
        for p in placed:
            if (_meta(p).get("namespace"), _meta(p).get("name")) == key:
                return p["spec"]["nodeName"]
        return None

    def _end(self, pod: dict, phase: str, reason: str) -> None:
        m = _meta(pod)
        code = 0 if phase == "Succeeded" else 1
        ended = [
            {
                "name": c.get("name"),
                "ready": False,
                "restartCount": 0,
                "image": c.get("image"),
                "state": {
                    "terminated": {"exitCode": code, "reason": reason, "finishedAt": now_text()}
                },
            }
            for c in (pod.get("spec") or {}).get("containers") or []
        ]
        status = {
            "phase": phase,
            "containerStatuses": ended,
            "conditions": [_condition("Ready", "PodCompleted", None, status="False")],
        }
        if reason == "DeadlineExceeded":
            status["reason"] = reason
        self.api.patch(
            _ns_path(PODS, m["namespace"], "pods", m["name"]) + "/status", {"status": status}
        )
        self.started.pop((m["namespace"], m["name"]), None)
        self.gpus.pop((m["namespace"], m["name"]), None)
        self._release(pod)

    # -- dcgm-exporter -----------------------------------------------------------------------

    def devices(self, node: dict, pods: list[dict]) -> list[dcgm_exporter.Device]:
        labels = node["metadata"]["labels"]
        name = node["metadata"]["name"]
        count = int(labels.get("nvidia.com/gpu.count", "0"))
        mig = labels.get("nvidia.com/mig.config", "").removeprefix("all-") or None
        per_gpu = count // cluster.GPUS_PER_NODE if mig else 1
        memory = int(labels.get("nvidia.com/gpu.memory", "0"))
        holders = {}
        for p in pods:
            m = _meta(p)
            key = (m["namespace"], m["name"])
            if (p.get("spec") or {}).get("nodeName") == name and key in self.gpus:
                for i in self.gpus[key]:
                    holders[i] = p
        utils = [_util(holders[i]) if i in holders else 0 for i in range(count)]
        out = []
        for i in range(count):
            pod = holders.get(i)
            util, gpu = utils[i], i // per_gpu
            used = memory * util // 110 if pod else 0
            # a MIG device's series carry its GPU's temperature and power (dcgm-exporter)
            board = sum(utils[gpu * per_gpu : (gpu + 1) * per_gpu]) / per_gpu
            values = dcgm_exporter.default_values(
                util,
                used,
                memory - used,
                temp=30 + int(board) // 3,
                power=70.0 + 6.0 * board,
                mig=bool(mig),
            )
            holder = []
            if pod:
                container = ((pod.get("spec") or {}).get("containers") or [{}])[0].get(
                    "name", "main"
                )
                holder = [
                    dcgm_exporter.Holder(_meta(pod)["namespace"], _meta(pod)["name"], container)
                ]
            # a MIG device is labelled with its GPU's UUID (and GPU_I_ID), as dcgm-exporter does
            uuid = (
                f"GPU-{zlib.crc32(f'{name}/{gpu}'.encode()):08x}-5a4d-4b3c-9d2e-000000000{gpu:03d}"
            )
            out.append(
                dcgm_exporter.Device(
                    gpu=gpu,
                    uuid=uuid,
                    model=labels["nvidia.com/gpu.product"].split("-MIG-")[0].replace("-", " ", 1),
                    values=values,
                    holders=holder,
                    mig=(mig, i % per_gpu + 1) if mig else None,
                    pci_bus_id=f"00000000:{0x10 + gpu:02X}:00.0",
                )
            )
        return out


_INDEX = "batch.kubernetes.io/job-completion-index"


def _setting(pod: dict, annotation: str) -> str | None:
    """An annotation of the pod, else its first container's SANDBOX_* variable."""
    given = (_meta(pod).get("annotations") or {}).get(annotation)
    if given is not None:
        return str(given)
    name = "SANDBOX_" + annotation.removeprefix("gpuctl.io/sandbox-").replace("-", "_").upper()
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    env = {e.get("name"): e.get("value") for e in containers[0].get("env") or []}
    return None if env.get(name) is None else str(env[name])


def _util(pod: dict) -> int:
    given = _setting(pod, GPU_UTIL)
    if given is not None and given.isdigit():
        return min(int(given), 100)
    wobble = int(time.time() // 5 + zlib.crc32(_meta(pod)["name"].encode())) % 17
    return 80 + wobble


def _runtime(pod: dict) -> float:
    value = _seconds(_setting(pod, RUNTIME))
    return DEFAULT_RUNTIME_S if value != value else value  # NaN: not given


def _finished(obj: dict) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("status") == "True" and c.get("type") in ("Complete", "Completed", "Failed"):
            return "Failed" if c["type"] == "Failed" else "Complete"
    return None


def _condition(kind: str, reason: str | None, message: str | None, status: str = "True") -> dict:
    out = {"type": kind, "status": status, "lastTransitionTime": now_text()}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


# --- the process ------------------------------------------------------------------------------

OPERATOR_NS = "gpu-operator"
OPERATOR_DAEMONSETS = {  # what the GPU Operator runs on each GPU node, with its images
    "nvidia-device-plugin-daemonset": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
    "gpu-feature-discovery": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
    "nvidia-dcgm-exporter": "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04",
}


JOBSET_IMAGE = "registry.k8s.io/jobset/jobset:v0.12.0"  # the JobSet CRD's release


def seed(api: Api, nodes: list[dict]) -> None:
    for ns in ("default", "kube-system", OPERATOR_NS, "jobset-system"):
        api.create(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        )
    for node in nodes:
        api.create("/api/v1/nodes", node)
    _seed_dra(api, nodes)
    # the JobSet controller is simulated (Simulation._jobset); Kueue's is not, so its
    # Deployment is left out and `gpuctl doctor` says so
    labels = {"control-plane": "controller-manager"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "jobset-controller-manager", "namespace": "jobset-system"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "manager", "image": JOBSET_IMAGE}]},
            },
        },
    }
    api.create(_ns_path("apps/v1", "jobset-system", "deployments"), deployment)
    api.patch(
        _ns_path("apps/v1", "jobset-system", "deployments", "jobset-controller-manager")
        + "/status",
        {"status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}},
    )
    gpu_nodes = sum(1 for n in nodes if "nvidia.com/gpu" in n["status"]["allocatable"])
    for name, image in OPERATOR_DAEMONSETS.items():
        pod = {
            "nodeSelector": {"nvidia.com/gpu.present": "true"},
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "containers": [{"name": name.removeprefix("nvidia-"), "image": image}],
        }
        ds = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": OPERATOR_NS, "labels": {"app": name}},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": pod},
            },
        }
        api.create(_ns_path("apps/v1", OPERATOR_NS, "daemonsets"), ds)
        counts = dict.fromkeys(
            (
                "desiredNumberScheduled",
                "currentNumberScheduled",
                "numberReady",
                "numberAvailable",
                "updatedNumberScheduled",
            ),
            gpu_nodes,
        )
        api.patch(
            _ns_path("apps/v1", OPERATOR_NS, "daemonsets", name) + "/status",
            {"status": {**counts, "numberMisscheduled": 0}},
        )


def _seed_dra(api: Api, nodes: list[dict]) -> None:
    """The simulated DRA driver's DeviceClasses, and a ResourceSlice per DRA node."""
    dra_nodes = [n for n in nodes if cluster.DRA_NODE in n["metadata"]["labels"]]
    if not dra_nodes:
        return
    base = f"/apis/{dra_driver.API_VERSION}"
    for device_class in dra_driver.DEVICE_CLASSES:
        api.create(f"{base}/deviceclasses", device_class)
    for n in dra_nodes:
        model = geometry.find_model(n["metadata"]["labels"][cluster.DRA_NODE])
        slice_ = dra_driver.resource_slice(n["metadata"]["name"], model, cluster.GPUS_PER_NODE)
        api.create(f"{base}/resourceslices", slice_)


class Exporters:
    """One dcgm-exporter per GPU node, its text refreshed each tick."""

    def __init__(self, nodes: list[dict]):
        self.nodes = [n for n in nodes if "nvidia.com/gpu" in n["status"]["allocatable"]]
        self.servers = [dcgm_exporter.ExporterServer("") for _ in self.nodes]

    def refresh(self, sim: Simulation, pods: list[dict]) -> None:
        for node, server in zip(self.nodes, self.servers):
            server.text = dcgm_exporter.metrics_text(
                sim.devices(node, pods), node["metadata"]["name"]
            )

    def scrape_config(self) -> dict:
        targets = [
            (s.address, f"nvidia-dcgm-exporter-{i:05d}", n["metadata"]["name"])
            for i, (s, n) in enumerate(zip(self.servers, self.nodes))
        ]
        return dcgm_exporter.servicemonitor_scrape_config(
            dcgm_exporter.GPU_OPERATOR, targets, False
        )

    def stop(self) -> None:
        for s in self.servers:
            s.stop()


def start_prometheus(binary: str, state_dir: str, scrape: dict, port: int) -> subprocess.Popen:
    import yaml

    folder = os.path.join(state_dir, "prometheus")
    os.makedirs(folder, exist_ok=True)
    config = os.path.join(folder, "prometheus.yml")
    with open(config, "w", encoding="utf-8") as f:
        yaml.safe_dump({"global": {"scrape_interval": "2s"}, "scrape_configs": [scrape]}, f)
    log = open(os.path.join(folder, "log"), "w")  # noqa: SIM115  the child keeps it
    return subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={os.path.join(folder, 'data')}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=error",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
    )


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> None:
    from gpuctl.sim.kube import write_kubeconfig

    parser = argparse.ArgumentParser(prog="python -m gpuctl.sim.sandbox")
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--nodes", default=cluster.DEFAULT_NODES)
    parser.add_argument("--kueue", action="store_true")
    parser.add_argument("--prometheus", default="prometheus", help="executable; '' for none")
    args = parser.parse_args(argv)
    import pathlib

    nodes = cluster.node_objects(cluster.parse_nodes(args.nodes))
    emu = KubeEmulator().start()
    emu.install_crds(
        "JobSet",
        *(("ResourceFlavor", "ClusterQueue", "LocalQueue", "Workload") if args.kueue else ()),
    )
    api = Api(emu.url)
    seed(api, nodes)
    sim, exporters = Simulation(api, nodes), Exporters(nodes)
    prom_bin = shutil.which(args.prometheus) if args.prometheus else None
    prom, prom_url = None, None
    if prom_bin:
        port = free_port()
        prom = start_prometheus(prom_bin, args.state_dir, exporters.scrape_config(), port)
        prom_url = f"http://127.0.0.1:{port}"
    kubeconfig = write_kubeconfig(pathlib.Path(args.state_dir, "kubeconfig"), emu.url)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    state = {
        "pid": os.getpid(),
        "api": emu.url,
        "kubeconfig": kubeconfig,
        "prometheus": prom_url,
        "prometheus_pid": prom.pid if prom else None,
        "nodes": args.nodes,
        "kueue": args.kueue,
        "started": now_text(),
    }
    tmp = os.path.join(args.state_dir, "sandbox.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, os.path.join(args.state_dir, "sandbox.json"))
    try:
        while not stop.is_set():
            try:
                sim.step()
                exporters.refresh(sim, api.items("/api/v1/pods"))
            except (OSError, ValueError) as e:  # one bad tick is logged, the next one retries
                print(f"{now_text()} tick failed: {e}", flush=True)
            stop.wait(1.0)
    finally:
        if prom is not None:
            prom.terminate()
            try:
                prom.wait(10)
            except subprocess.TimeoutExpired:
                prom.kill()
        exporters.stop()
        emu.stop()
        with_state = os.path.join(args.state_dir, "sandbox.json")
        if os.path.exists(with_state):
            os.remove(with_state)


if __name__ == "__main__":
    main()
