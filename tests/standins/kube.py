"""The Kubernetes API emulator (kmock) over real HTTP, on its own event loop in a thread,
so the official synchronous `kubernetes` client talks to it exactly as to a cluster."""

from __future__ import annotations

import asyncio
import threading

import pytest

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
        async with kmock.KubernetesEmulator() as emu, kmock.Server(emu) as srv:
            emu.resources.load_bundled()
            emu["get /version/"] << VERSION
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


@pytest.fixture
def kube(tmp_path, monkeypatch):
    """A fresh emulator per test, with KUBECONFIG pointing at it (context namespace 'default')."""
    emu = KubeEmulator().start()
    monkeypatch.setenv("KUBECONFIG", write_kubeconfig(tmp_path / "kubeconfig", emu.url))
    yield emu
    emu.stop()


@pytest.fixture
def kube_api(kube):
    """The official client's ApiClient pointed at the emulator, for seeding and inspecting."""
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = kube.url
    with client.ApiClient(cfg) as api:
        yield api
