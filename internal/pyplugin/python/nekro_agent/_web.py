"""A plugin's web router (mount_router) served in the plugin's own process.

nekro's HTTP server answers /plugins/{key}/... for a Python plugin by
sending the request over the plugin's connection (op "http": method,
path, query, headers and the whole body, at most 1 MiB) and writing back
what the plugin's ASGI application sends, as it sends it:

  {"id": N, "op": "http.start", "args": {"status": 200, "headers": [[k, v], ...],
                                          "body": base64, "more": true}}
  {"id": N, "op": "http.body", "args": {"body": base64, "more": true}}
  ...
  {"id": N, "op": "http.body", "args": {"body": base64, "more": false}}

The start carries the first body chunk (most answers are one message);
the request's answer, {"id": N, "result": null} (or "error": the
application raised), is sent only when the answer did not end with a
"more": false chunk.

nekro acknowledges each body chunk once it has written it to the client
({"id": N, "op": "http.ack"}); at most WINDOW chunks are unacknowledged,
so a slow client slows the application's send() instead of filling
memory. {"id": N, "op": "http.cancel"} says the client left (or the
answer took too long to start): receive() then answers http.disconnect,
as an ASGI server does, and the request's task is cancelled shortly
after.

The router is the reference's: an APIRouter that the function given to
mount_router returns, included under /plugins/{key} in a FastAPI
application of the plugin's own (no documentation pages), so the
handlers see the same paths and URLs as in the reference.
"""
from __future__ import annotations

import asyncio
import base64
import traceback

# Unacknowledged body chunks per response, and the largest chunk sent.
WINDOW = 16
CHUNK = 256 << 10
# How long a cancelled request's task may go on after receive() said
# http.disconnect before it is cancelled.
CANCEL_GRACE = 1.0


class RouterError(Exception):
    """The plugin mounts a router that cannot be served."""


def build_app(plugin):
    """The plugin's router as an ASGI application under /plugins/{key},
    or None when it mounts none or its factory fails (logged, as the
    reference logs it and serves the plugin without routes). A plugin
    that mounts a router on a system without FastAPI fails to load,
    the package named."""
    if plugin.router_factory is None:
        return None
    try:
        from fastapi import APIRouter, FastAPI
    except ImportError as e:
        raise RouterError("plugin %s mounts a web router (mount_router), which needs the fastapi package: %s "
                          "(install it: Debian's python3-fastapi, or list it in the plugin's requirements and "
                          "give --python-index)" % (plugin.key, e)) from e
    router = plugin.get_plugin_router()
    if router is None:
        return None
    if not isinstance(router, APIRouter):
        plugin.logger.error("the router function of plugin %s must return a fastapi APIRouter, not %s",
                            plugin.key, type(router).__name__)
        return None
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.include_router(router, prefix="/plugins/" + plugin.key)
    return app


class _Stream:
    __slots__ = ("unacked", "credit", "gone", "task")

    def __init__(self):
        self.unacked = 0
        self.credit = asyncio.Event()
        self.gone = asyncio.Event()
        self.task = None


class Web:
    """Serves nekro's http requests with the plugin's application."""

    def __init__(self, app, link, key: str):
        self.app, self.link, self.key = app, link, key
        self.streams: dict = {}

    def control(self, msg: dict) -> None:
        """An acknowledgement or a cancellation from nekro (no answer)."""
        s = self.streams.get(msg.get("id"))
        if s is None:
            return
        if msg.get("op") == "http.ack":
            s.unacked = max(0, s.unacked - 1)
            s.credit.set()
            return
        s.gone.set()
        s.credit.set()
        task = s.task
        if task is not None and not task.done():
            asyncio.get_running_loop().call_later(CANCEL_GRACE, task.cancel)

    async def serve(self, sid: int, req: dict) -> bool:
        """Answer request sid; True when the answer was sent in full."""
        s = _Stream()
        s.task = asyncio.current_task()
        self.streams[sid] = s
        try:
            if self.app is None:
                await self._plain(sid, 404, b'{"detail":"Not Found"}')
                return True
            return await self._serve(sid, s, req)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - logged here, the client gets a bare 500
            self.link.send({"op": "log", "level": "error",
                            "msg": "plugin %s: web route %s %s failed: %s: %s\n%s" % (
                                self.key, req.get("method"), req.get("path"), type(e).__name__, e,
                                "".join(traceback.format_exception(type(e), e, e.__traceback__))[-4000:])})
            raise
        finally:
            self.streams.pop(sid, None)

    async def _plain(self, sid: int, status: int, body: bytes) -> None:
        self.link.send({"id": sid, "op": "http.start",
                        "args": {"status": status, "headers": [["content-type", "application/json"]],
                                 "body": base64.b64encode(body).decode("ascii"), "more": False}})

    async def _serve(self, sid: int, s: _Stream, req: dict) -> None:
        body = base64.b64decode(req.get("body") or "")
        headers = [(str(k).lower().encode("latin-1", "replace"), str(v).encode("latin-1", "replace"))
                   for k, v in req.get("headers") or []]
        client = req.get("client") or ["", 0]
        server = req.get("server") or ["", 0]
        scope = {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
            "method": str(req.get("method") or "GET").upper(), "scheme": req.get("scheme") or "http",
            "path": req.get("path") or "/", "raw_path": (req.get("raw_path") or req.get("path") or "/").encode("latin-1", "replace"),
            "root_path": "", "query_string": (req.get("query") or "").encode("latin-1", "replace"),
            "headers": headers, "client": (client[0], int(client[1])), "server": (server[0], int(server[1])),
            "extensions": {},
        }
        delivered = False

        async def receive():
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await s.gone.wait()
            return {"type": "http.disconnect"}

        started = False
        # The start is held for the first body chunk to go with it when the
        # application sends both in one step (a plain Response does); a
        # streamed answer's start goes alone at the end of that step.
        start = None
        done = False

        def flush_start():
            nonlocal start
            if start is not None and not s.gone.is_set():
                self.link.send({"id": sid, "op": "http.start", "args": start})
            start = None

        async def send(message):
            nonlocal started, start, done
            kind = message.get("type")
            if s.gone.is_set():
                return  # the client left: what is sent after that goes nowhere, as with an ASGI server
            if kind == "http.response.start":
                started = True
                hs = [[_text(k), _text(v)] for k, v in message.get("headers") or []]
                start = {"status": int(message.get("status", 200)), "headers": hs}
                asyncio.get_running_loop().call_soon(flush_start)
            elif kind == "http.response.body" and start is not None and len(message.get("body") or b"") <= CHUNK:
                data = bytes(message.get("body") or b"")
                more = bool(message.get("more_body", False))
                start["body"], start["more"] = base64.b64encode(data).decode("ascii"), more
                self.link.send({"id": sid, "op": "http.start", "args": start})
                start = None
                s.unacked += more
                done = not more
            elif kind == "http.response.body":
                flush_start()
                data = bytes(message.get("body") or b"")
                more = bool(message.get("more_body", False))
                pieces = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)] or [b""]
                for i, piece in enumerate(pieces):
                    while s.unacked >= WINDOW and not s.gone.is_set():
                        s.credit.clear()
                        await s.credit.wait()
                    if s.gone.is_set():
                        return
                    last = not more and i == len(pieces) - 1
                    s.unacked += not last
                    self.link.send({"id": sid, "op": "http.body",
                                    "args": {"body": base64.b64encode(piece).decode("ascii"), "more": not last}})
                    done = last

        await self.app(scope, receive, send)
        flush_start()  # a start and no body
        if not started and not s.gone.is_set():
            raise RouterError("the plugin's application returned without an answer")
        return done


def _text(v) -> str:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("latin-1")
    return str(v)
