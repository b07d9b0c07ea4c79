"""A job's volumes and secrets: parse them, check where they mount, render the pod's part.

A job may mount PersistentVolumeClaims, size-limited emptyDirs (on disk or in memory),
ConfigMaps and Secrets, and take environment variables from keys of Secrets. It can never
mount a directory of its node (hostPath).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuctl.common import k8s_names
from gpuctl.common.k8s_names import DATA_KEY, DNS1123_SUBDOMAIN, ENV_VAR
from gpuctl.common.quantity import POSITIVE
from gpuctl.common.spec_fields import (
    FLAG,
    NAME,
    QUANTITY,
    STRING_MAP,
    TEXT,
    Field,
    Refusal,
    Rule,
    Table,
)
from gpuctl.common.specfile import Fields, dotted

NO_SIZE = Refusal("give its size limit, e.g. empty_dir: 200Gi")
VOLUME = Table(
    Field("name", NAME, "The volume's name, unique in the job.", required=True),
    Field(
        "pvc",
        TEXT,
        "A PersistentVolumeClaim's name.",
        pattern=Rule(DNS1123_SUBDOMAIN, "a valid PersistentVolumeClaim name"),
    ),
    Field(
        "empty_dir",
        QUANTITY,
        "An empty directory of this size limit, e.g. 200Gi.",
        pattern=Rule(POSITIVE, "a size limit", why=lambda _: NO_SIZE),
    ),
    Field(
        "config_map",
        TEXT,
        "A ConfigMap's name: its keys as files.",
        pattern=Rule(DNS1123_SUBDOMAIN, "a valid ConfigMap name"),
    ),
    Field("mount", TEXT, "Where it is mounted in the container.", required=True),
    Field("read_only", FLAG, "Mount it read-only.", default=False),
    Field("memory", FLAG, "An empty_dir in RAM (tmpfs).", default=False),
)
SOURCES = ("pvc", "empty_dir", "config_map")
SECRET = Table(
    Field(
        "secret",
        TEXT,
        "The Secret's name.",
        required=True,
        pattern=Rule(DNS1123_SUBDOMAIN, "a valid Secret name"),
    ),
    Field(
        "env",
        STRING_MAP,
        "Variables from its keys: variable -> key.",
        keys=Rule(ENV_VAR, "a valid environment variable name"),
        pattern=Rule(DATA_KEY, "a valid key of a Secret"),
        at_entry=True,
    ),
    Field("mount", TEXT, "Where its keys are mounted as files, read-only."),
)
SHM_VOLUME = "dshm"  # the volume `shm:` renders, mounted at /dev/shm
SHM_PATH = "/dev/shm"
# Mounting over these hides what the container needs from its runtime (the GPU device
# nodes, /proc, /sys); runtimes refuse some of them, and the pod then never starts.
SYSTEM_DIRS = ("/dev", "/proc", "/sys")


@dataclass(frozen=True)
class Volume:
    name: str
    kind: str  # one of SOURCES
    mount: str
    source: str | None = None  # the PersistentVolumeClaim's or ConfigMap's name
    size: str | None = None  # an empty_dir's size limit
    memory: bool = False  # an empty_dir in RAM (tmpfs)
    read_only: bool = False
    where: str = field(default="", compare=False)  # "job.yaml:8: volumes[0].pvc"


@dataclass(frozen=True)
class SecretUse:
    secret: str
    env: tuple[tuple[str, str], ...] = ()  # (variable, key of the Secret)
    mount: str | None = None  # every key as a file, read-only
    where: str = field(default="", compare=False)  # "job.yaml:12: secrets[0].secret"


def parse(
    f: Fields, env: Mapping[str, str], reserved_env: Collection[str] = ()
) -> tuple[tuple[Volume, ...], tuple[SecretUse, ...]]:
    """The `volumes:` and `secrets:` of the mapping F. ENV: the job's plain variables, which a
    Secret may not set again; RESERVED_ENV: variables gpuctl sets itself."""
    mounts: list[tuple[str, Fields]] = []
    volumes = tuple(_volumes(f, mounts))
    secrets = tuple(_secrets(f, mounts, env, reserved_env))
    _check_mounts(mounts)
    return volumes, secrets


def mount_problem(path: str) -> str | None:
    """Why PATH cannot be a directory in the container (None: it can)."""
    if not path.isprintable():
        return f"{path!r} contains a control character"
    if not path.startswith("/"):
        return f"{path!r} is not an absolute path (it must start with /)"
    if path == "/":
        return "cannot be / (it would hide the whole image)"
    if any(part in ("", ".", "..") for part in path[1:].split("/")):
        return f"{path!r} is not a plain path (no '//', '.', '..' or trailing '/')"
    return None


def _volumes(f: Fields, mounts: list[tuple[str, Fields]]) -> list[Volume]:
    out: list[Volume] = []
    names: dict[str, Fields] = {}
    for v in f.list_of_maps("volumes"):
        for key in v.data:
            if str(key).lower().replace("_", "").replace("-", "") == "hostpath":
                raise v.error(
                    key,
                    "a job cannot mount a directory of its node (hostPath)",
                    hint="use a pvc, an empty_dir or a config_map",
                )
        v.reject_unknown(VOLUME)
        name = v.read(VOLUME["name"])
        if name == SHM_VOLUME:
            raise v.error("name", f"{name!r} is the name of the volume `shm:` makes")
        if name in names:
            raise v.error("name", f"{name!r} is also the name of {_at(names[name], 'name')}")
        names[name] = v
        kinds = [k for k in SOURCES if k in v.data]
        if len(kinds) != 1:
            raise v.error(
                kinds[1] if kinds else None, "give exactly one of pvc, empty_dir, config_map"
            )
        kind = kinds[0]
        memory = v.read(VOLUME["memory"])
        read_only = v.read(VOLUME["read_only"])
        if memory and kind != "empty_dir":
            raise v.error("memory", "applies to an empty_dir only")
        if read_only and kind == "empty_dir":
            raise v.error("read_only", "an empty_dir starts empty: read-only, it would stay empty")
        source = size = None
        if kind == "empty_dir":
            size = v.read(VOLUME["empty_dir"])
            if size is None:  # `empty_dir:` with nothing
                raise v.error("empty_dir", NO_SIZE.message)
        else:
            source = v.read(VOLUME[kind])
        mount = v.read(VOLUME["mount"])
        mounts.append((mount, v))
        out.append(
            Volume(
                name=name,
                kind=kind,
                mount=mount,
                source=source,
                size=size,
                memory=memory,
                read_only=read_only,
                where=v.doc.where(v.path + (kind,)),
            )
        )
    return out


def _secrets(
    f: Fields,
    mounts: list[tuple[str, Fields]],
    env: Mapping[str, str],
    reserved_env: Collection[str],
) -> list[SecretUse]:
    out: list[SecretUse] = []
    seen: dict[str, Fields] = {}
    env_from: dict[str, Fields] = {}  # variable -> the entry that sets it
    for s in f.list_of_maps("secrets"):
        s.reject_unknown(SECRET)
        name = s.read(SECRET["secret"])
        if name in seen:
            raise s.error(
                "secret",
                f"{name!r} is also used by {_at(seen[name], 'secret')}",
                hint="give one entry per Secret, with env and mount together",
            )
        seen[name] = s
        variables = s.read(SECRET["env"], {})
        for var in variables:
            path = s.path + ("env", var)
            if var in reserved_env:
                raise s.doc.error(path, f"{var} is set by gpuctl on every worker")
            if var in env:
                raise s.doc.error(path, f"{var} is also set in env")
            if var in env_from:
                raise s.doc.error(path, f"{var} is also set by {_at(env_from[var], 'secret')}")
            env_from[var] = s
        mount = s.read(SECRET["mount"])
        if mount is not None:
            mounts.append((mount, s))
        if not variables and mount is None:
            raise s.error(
                None, "give env (variables from its keys), mount (its keys as files), or both"
            )
        out.append(
            SecretUse(
                secret=name,
                env=tuple(variables.items()),
                mount=mount,
                where=s.doc.where(s.path + ("secret",)),
            )
        )
    return out


def _check_mounts(mounts: list[tuple[str, Fields]]) -> None:
    for path, entry in mounts:
        problem = mount_problem(path)
        if problem:
            raise entry.error("mount", problem)
        if path == SHM_PATH or path.startswith(SHM_PATH + "/"):
            raise entry.error(
                "mount",
                f"{path} is where `shm:` mounts shared memory",
                hint="set shm: SIZE instead",
            )
        for system in SYSTEM_DIRS:
            if path == system or path.startswith(system + "/"):
                raise entry.error("mount", f"{path} would hide the container's {system}")
    # Sorted by path segments, a mount that is under another one comes right after a mount
    # it is under (everything between the two is under the outer one too).
    ordered = sorted(
        ((tuple(path[1:].split("/")), i, entry) for i, (path, entry) in enumerate(mounts)),
        key=lambda t: (t[0], t[1]),
    )
    for (outer, _, first), (inner, _, second) in zip(ordered, ordered[1:]):
        if inner == outer:
            raise second.error(
                "mount", f"/{'/'.join(inner)} is also mounted by {_at(first, 'mount')}"
            )
        if inner[: len(outer)] == outer:
            raise second.error(
                "mount",
                f"/{'/'.join(inner)} is under /{'/'.join(outer)}, mounted by {_at(first, 'mount')}",
                hint="mount volumes side by side, not one inside another",
            )


def _at(entry: Fields, key: str) -> str:
    """'volumes[0].mount (job.yaml:5)': another field, named in a message about this one."""
    path = entry.path + (key,)
    return f"{dotted(path)} ({entry.doc.file_of(path)}:{entry.doc.line(path)})"


# ---------- rendering ----------


def pod_volumes(
    volumes: tuple[Volume, ...], secrets: tuple[SecretUse, ...]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pod's volumes and the container's volumeMounts for them."""
    pod: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    for v in volumes:
        if v.kind == "pvc":
            claim: dict[str, Any] = {"claimName": v.source}
            if v.read_only:
                claim["readOnly"] = True
            pod.append({"name": v.name, "persistentVolumeClaim": claim})
        elif v.kind == "config_map":
            pod.append({"name": v.name, "configMap": {"name": v.source}})
        else:
            empty: dict[str, Any] = {"medium": "Memory"} if v.memory else {}
            pod.append({"name": v.name, "emptyDir": {**empty, "sizeLimit": v.size}})
        mounts.append(_mount(v.name, v.mount, v.read_only))
    taken = {v.name for v in volumes} | {SHM_VOLUME}
    for i, s in enumerate(secrets):
        if s.mount is None:
            continue
        name = _secret_volume_name(s.secret, i, taken)
        taken.add(name)
        pod.append({"name": name, "secret": {"secretName": s.secret}})
        mounts.append(_mount(name, s.mount, True))
    return pod, mounts


def secret_env(secrets: tuple[SecretUse, ...]) -> list[dict[str, Any]]:
    return [
        {"name": var, "valueFrom": {"secretKeyRef": {"name": s.secret, "key": key}}}
        for s in secrets
        for var, key in s.env
    ]


def _mount(name: str, path: str, read_only: bool) -> dict[str, Any]:
    mount: dict[str, Any] = {"name": name, "mountPath": path}
    if read_only:
        mount["readOnly"] = True
    return mount


def _secret_volume_name(secret: str, index: int, taken: set[str]) -> str:
    """secret-NAME where that is a free volume name, else secret-INDEX (then -2, -3, …)."""
    name = "secret-" + secret.replace(".", "-")
    if k8s_names.dns1123_label(name) and name not in taken:
        return name
    name, n = f"secret-{index}", 1
    while name in taken:
        n += 1
        name = f"secret-{index}-{n}"
    return name
