"""Faults a real API server rarely produces on demand, from a scripted loopback HTTP server:
malformed watch lines, HTTP 410 and 5xx on a watch, throttling, non-JSON answers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp import web

from pyscheduler.kube import errors
from pyscheduler.kube.client import ConnectionConfig, KubeClient
from pyscheduler.kube.informer import Informer
from tests.integration.test_kube_client import run
from tests.integration.test_kube_informer import Recorder, eventually

PATH = "/api/v1/namespaces/ns/configmaps"
Step = Callable[[web.Request], Awaitable[web.StreamResponse]]


def cm(name: str, rv: int, uid: str | None = None) -> dict[str, Any]:
    return {"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv),
                         "uid": uid or f"uid-{name}"}}


def listing(rv: int, *items: dict[str, Any]) -> Step:
    async def step(request: web.Request) -> web.StreamResponse:
        return web.json_response({"kind": "ConfigMapList", "apiVersion": "v1",
                                  "metadata": {"resourceVersion": str(rv)},
                                  "items": [{k: v for k, v in i.items()
                                             if k not in ("kind", "apiVersion")}
                                            for i in items]})
    return step


def status(code: int, reason: str) -> Step:
    async def step(request: web.Request) -> web.StreamResponse:
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                  "code": code, "reason": reason, "message": reason},
                                 status=code)
    return step


def stream(*lines: bytes | dict[str, Any], hold: bool = False) -> Step:
    async def step(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        for line in lines:
            await resp.write(line if isinstance(line, bytes) else orjson.dumps(line) + b"\n")
        if hold:
            await asyncio.sleep(30)  # until the informer goes away
        await resp.write_eof()
        return resp
    return step


class Scripted:
    """A server answering list and watch requests from two scripts, recording the requests."""

    def __init__(self, lists: list[Step], watches: list[Step]) -> None:
        self.lists = lists
        self.watches = watches
        self.requests: list[dict[str, str]] = []
        self.runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        self.requests.append(query)
        script = self.watches if query.get("watch") == "true" else self.lists
        if not script:
            return await stream(hold=True)(request)
        return await script.pop(0)(request)

    async def start(self) -> KubeClient:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return KubeClient(ConnectionConfig(host=f"http://127.0.0.1:{port}", token="t"),
                          max_retries=2)

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    def watch_rvs(self) -> list[str]:
        return [q.get("resourceVersion", "") for q in self.requests if q.get("watch")]


async def informer_against(server: Scripted, seen: Recorder, until: Callable[[], bool],
                           setup: Callable[[Informer], None] | None = None) -> Informer:
    client = await server.start()
    informer = Informer(client, PATH, backoff_initial=0.01, backoff_max=0.05,
                        **seen.handlers())
    if setup is not None:
        setup(informer)
    informer.start()
    try:
        await eventually(until, timeout=5, what="the scripted scenario")
    finally:
        await informer.stop()
        await client.close()
        await server.stop()
    return informer


def test_malformed_watch_lines_lead_to_a_relist_not_a_crash() -> None:
    server = Scripted(
        lists=[listing(10, cm("a", 1)), listing(20, cm("a", 1), cm("b", 11), cm("c", 15)),
               listing(30, cm("a", 1), cm("b", 11), cm("c", 15), cm("d", 25))],
        watches=[stream({"type": "ADDED", "object": cm("b", 11)}, b"{this is not json\n",
                        {"type": "ADDED", "object": cm("never", 12)}, hold=True),
                 stream({"type": "ADDED", "object": {"metadata": {"resourceVersion": "21"}}},
                        hold=True),
                 stream({"type": "SOMETHING_NEW", "object": cm("x", 31)},
                        {"type": "ADDED", "object": cm("e", 32)}, hold=True)])
    seen = Recorder()
    informer = run(lambda: informer_against(server, seen, lambda: "e" in seen.model))
    assert seen.names("add") == ["a", "b", "c", "d", "e"]
    assert "never" not in seen.model
    assert informer.malformed_events == 2 and informer.relists == 2
    assert server.watch_rvs() == ["10", "20", "30"]


def test_gone_and_server_errors_on_the_watch() -> None:
    def boom(old: dict[str, Any], new: dict[str, Any]) -> None:
        raise RuntimeError("a handler bug")
    server = Scripted(
        lists=[listing(5, cm("a", 1)), listing(9, cm("b", 8)),
               listing(20, cm("b", 18, uid="uid-b2"), cm("a", 19))],
        watches=[status(500, "InternalError"),
                 status(410, "Expired"),
                 stream({"type": "MODIFIED", "object": cm("b", 10)},
                        {"type": "BOOKMARK", "object": {"kind": "ConfigMap",
                                                        "metadata": {"resourceVersion": "12"}}}),
                 stream({"type": "ERROR", "object": {"kind": "Status", "code": 410,
                                                     "reason": "Expired",
                                                     "message": "too old resource version"}}),
                 stream({"type": "MODIFIED", "object": cm("b", 21, uid="uid-b2")}, hold=True)])
    seen = Recorder()
    informer = run(lambda: informer_against(
        server, seen, lambda: seen.model.get("b") == "21",
        # A second handler that raises must not disturb the first.
        setup=lambda inf: inf.add_handlers(on_update=boom)))
    # 500: reconnect from the same resourceVersion; 410 (status or ERROR event): relist.
    assert server.watch_rvs() == ["5", "5", "9", "12", "20"]
    assert informer.reconnects == 1 and informer.relists == 2
    assert informer.handler_errors == 2  # both updates of b reached the raising handler too
    # First relist: a is gone, b is new. Second: b was recreated (new uid), a is new again.
    assert [(k, n) for k, n, _ in seen.calls] == [
        ("add", "a"), ("delete", "a"), ("add", "b"), ("update", "b"),
        ("delete", "b"), ("add", "b"), ("add", "a"), ("update", "b")]
    assert informer.objects["ns/b"]["metadata"]["uid"] == "uid-b2"


def test_watches_closed_at_once_back_off_instead_of_spinning() -> None:
    server = Scripted(lists=[listing(5, cm("a", 1))],
                      watches=[stream() for _ in range(4)] +
                              [stream({"type": "ADDED", "object": cm("b", 6)}, hold=True)])
    seen = Recorder()
    informer = run(lambda: informer_against(server, seen, lambda: "b" in seen.model))
    assert informer.reconnects == 4 and informer.relists == 0
    assert server.watch_rvs() == ["5"] * 5


def test_request_retries_throttling_and_reports_bad_answers() -> None:
    calls: list[str] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        calls.append(request.path)
        if request.path == "/throttled" and len(calls) < 3:
            return web.json_response({"kind": "Status", "code": 429,
                                      "reason": "TooManyRequests", "message": "slow down",
                                      "details": {"retryAfterSeconds": 0}},
                                     status=429, headers={"Retry-After": "0"})
        if request.path == "/always-throttled":
            return web.json_response({"kind": "Status", "code": 429,
                                      "reason": "TooManyRequests", "message": "slow down"},
                                     status=429, headers={"Retry-After": "0"})
        if request.path == "/html":
            return web.Response(text="<html>bad gateway</html>", status=502)
        if request.path == "/not-json":
            return web.Response(text="hello")
        return web.json_response({"ok": True})

    async def body() -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            async with KubeClient(ConnectionConfig(host=f"http://127.0.0.1:{port}"),
                                  max_retries=3) as client:
                assert await client.get("/throttled") == {"ok": True}
                assert calls.count("/throttled") == 3
                with pytest.raises(errors.TooManyRequestsError) as throttled:
                    await client.get("/always-throttled")
                assert calls.count("/always-throttled") == 4  # 1 + max_retries
                assert throttled.value.retry_after == 0 and errors.is_retryable(throttled.value)
                with pytest.raises(errors.ServerError) as html:
                    await client.get("/html")
                assert html.value.code == 502 and html.value.reason == ""
                assert errors.is_retryable(html.value)
                with pytest.raises(errors.DecodeError):
                    await client.get("/not-json")
        finally:
            await runner.cleanup()
    run(body)


def test_an_expired_token_is_refreshed_once_after_a_401() -> None:
    tokens = iter(["Bearer old", "new", "newer"])
    fetched: list[str] = []

    def token_source() -> str:
        fetched.append(next(tokens))
        return fetched[-1]

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != "Bearer new":
            return web.json_response({"kind": "Status", "code": 401, "reason": "Unauthorized",
                                      "message": "Unauthorized"}, status=401)
        return web.json_response({"ok": True})

    async def body() -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        config = ConnectionConfig(host=f"http://127.0.0.1:{port}", token_source=token_source)
        try:
            async with KubeClient(config) as client:
                results = await asyncio.gather(*(client.get("/x") for _ in range(5)))
                assert results == [{"ok": True}] * 5
                assert fetched == ["Bearer old", "new"]  # one load, one refresh, shared
        finally:
            await runner.cleanup()
    run(body)
