"""The Kubernetes API emulator (kmock) over real HTTP, on its own event loop in a thread,
so the official synchronous `kubernetes` client talks to it exactly as to a cluster. The
tests' stand-in (tests/standins/kube.py) and `gpuctl sandbox` run it; a simulator, not a
Kubernetes API server."""

from __future__ import annotations

import asyncio
import threading

VERSION = {
    "major": "1",
    "minor": "29",
    "gitVersion": "v1.29.0-kmock",
    "gitCommit": "0",
    "gitTreeState": "clean",
    "buildDate": "2024-01-01T00:00:00Z",
    "goVersion": "go1.21",
    "compiler": "gc",
    "platform": "linux/amd64",
}


_namespace_paths_patched = False


def _patch_namespace_paths() -> None:
    """kmock 0.8 fails (HTTP 500) to parse /api/v1/namespaces[/NAME[/status]]."""
    global _namespace_paths_patched
    from kmock._internal import parsing

    if _namespace_paths_patched:
        return
    original = parsing.parse_path

    def parse_path(path):
        parts = path.strip("/").split("/")
        if parts[:3] == ["api", "v1", "namespaces"] and (
            len(parts) <= 4 or (len(parts) == 5 and parts[4] in ("status", "finalize"))
        ):
            return parsing.ParsedPath(
                "",
                "v1",
                "namespaces",
                None,
                parts[3] if len(parts) > 3 else None,
                parts[4] if len(parts) > 4 else None,
            )
        return original(path)

    parsing.parse_path = parse_path
    _namespace_paths_patched = True


_crd_emulator = None


def crd_emulator_class():
    """kmock's emulator, extended the way its docs invite (a subclass) with what an API
    server does for custom resources and kmock does not:

    - creating a CustomResourceDefinition makes its served versions appear in API discovery
      (/apis, /apis/GROUP, /apis/GROUP/VERSION) and their objects servable;
    - an object of a resource the server does not have is refused (404), not stored;
    - a custom resource written (created or patched) is checked against its CRD's schema
      and CEL rules (gpuctl/sim/crd_schema.py) and refused with 422 when invalid. Stricter than
      an API server on one point: an unknown field is refused, where a server would prune
      it (gpuctl would lose it). Transition rules (oldSelf) and admission webhooks are not
      run.
    """
    global _crd_emulator
    if _crd_emulator is not None:
        return _crd_emulator
    import copy

    import attrs
    import kmock
    from kmock._internal import dicts

    from gpuctl.sim import crd_schema

    crds = kmock.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")

    @attrs.define(kw_only=True)
    class CrdServingEmulator(kmock.KubernetesEmulator):
        _schemas: dict = attrs.field(factory=dict, init=False)  # resource -> (CRD, version)

        async def _handle(self, request):
            res, act = request.resource, request.action
            if res is not None and act in (kmock.action.CREATE, kmock.action.UPDATE):
                if res not in self.resources:
                    raise kmock.KubernetesResourceNotFoundError()
                if res in self._schemas and request.subresource in (None, "status"):
                    self._check(request)
            response = await super()._handle(request)
            if res == crds and act == kmock.action.CREATE and response.status < 300:
                self._serve(request.data)
            return response

        def _check(self, request) -> None:
            res, data = request.resource, request.data
            if request.action == kmock.action.CREATE:
                candidate, name = data, (data.get("metadata") or {}).get("name")
            else:
                key = (res, request.namespace, request.name)
                if key not in self.objects or self.objects[key].deleted:
                    return  # the emulator answers 404 itself
                candidate = dicts.patch_dict(copy.deepcopy(self.objects[key].raw), data)
                name = request.name
            definition, version = self._schemas[res]
            kind = definition["spec"]["names"]["kind"]
            if kind in crd_schema.CRD_FILES and definition == crd_schema.crd(kind):
                check = crd_schema.validator(kind, version)
            else:
                check = crd_schema.validator_of(definition, version)
            problems = crd_schema.errors(candidate, definition, check)
            if problems:
                raise kmock.KubernetesError(
                    status=422,
                    reason="Invalid",
                    message=f"{kind}.{res.group} {name!r} is invalid: " + "; ".join(problems),
                )

        def _serve(self, definition: dict) -> None:
            spec = definition["spec"]
            names = spec["names"]
            for v in spec["versions"]:
                if not v.get("served"):
                    continue
                res = kmock.resource(spec["group"], v["name"], names["plural"])
                self.resources[res] = kmock.ResourceInfo(
                    kind=names["kind"],
                    singular=names.get("singular"),
                    namespaced=spec["scope"] == "Namespaced",
                    verbs={"create", "delete", "get", "list", "patch", "update", "watch"},
                    shortnames=set(names.get("shortNames") or ()),
                    subresources={"status"} if "status" in (v.get("subresources") or {}) else (),
                )
                self._schemas[res] = (definition, v["name"])

    _crd_emulator = CrdServingEmulator
    return _crd_emulator


class KubeEmulator:
    """A running emulator: `.url` for clients, `.call(fn)` to touch its state safely."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kmock", daemon=True)

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())

    async def _main(self):
        import kmock

        self._stop = asyncio.Event()
        async with crd_emulator_class()() as emu, kmock.Server(emu) as srv:
            emu.resources.load_bundled()
            emu["get /version/"] << VERSION
            emu["get /apis/"] << emu._serve_apis  # the client asks with the slash
            self.emulator, self.url = emu, str(srv.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()

    def start(self) -> KubeEmulator:
        _patch_namespace_paths()
        self.thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("kmock did not start")
        return self

    def call(self, fn, *a, **kw):
        async def _c():
            return fn(*a, **kw)

        return asyncio.run_coroutine_threadsafe(_c(), self.loop).result(10)

    def install_crds(self, *kinds: str, served: tuple[str, ...] | None = None) -> None:
        """Create the upstream CRDs of these kinds (tests/crds/, shipped as gpuctl/sim/crds/)
        through the API, as `kubectl apply -f` of a release's manifests would; `served` limits
        the versions served (an older release: Kueue before 0.15 served only v1beta1)."""
        import copy

        from kubernetes import client

        from gpuctl.sim import crd_schema

        cfg = client.Configuration()
        cfg.host = self.url
        with client.ApiClient(cfg) as api:
            ext = client.ApiextensionsV1Api(api)
            for kind in kinds:
                definition = crd_schema.crd(kind)
                if served is not None:
                    definition = copy.deepcopy(definition)
                    for v in definition["spec"]["versions"]:
                        v["served"] = v["storage"] = v["name"] in served
                ext.create_custom_resource_definition(
                    definition, _preload_content=False
                ).release_conn()

    def requests(self) -> list:
        """Every request the emulator has served (method, path, query) — for asserting
        what the client sent, e.g. label selectors the emulator itself ignores."""
        return self.call(
            lambda: [
                # the method as sent ("POST"; str() of kmock's enum reads "method.POST")
                (getattr(r.method, "value", str(r.method)), r.url.path, dict(r.url.query))
                for r in self.emulator._requests
            ]
        )

    def stop(self):
        self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(10)


def write_kubeconfig(path, url: str, namespace: str = "default") -> str:
    import yaml

    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "emu",
        "clusters": [{"name": "emu", "cluster": {"server": url}}],
        "users": [{"name": "emu", "user": {"token": "test"}}],
        "contexts": [
            {"name": "emu", "context": {"cluster": "emu", "user": "emu", "namespace": namespace}}
        ],
    }
    path.write_text(yaml.safe_dump(cfg))
    return str(path)
