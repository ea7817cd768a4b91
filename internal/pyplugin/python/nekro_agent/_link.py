"""The connection between a plugin's Python process and nekro.

One Unix socket, newline-delimited JSON both ways (the framing of the
sandbox RPC). nekro sends requests with an "id" (calls, hooks) and reads
answers with the same "id"; the plugin sends requests with a "req" (store,
files, messages, logs) and reads answers with the same "req". Nothing
but JSON crosses: no pickle.
"""
from __future__ import annotations

import asyncio
import contextvars
import itertools
import json
import threading

# The call the current task or thread serves: its token lets nekro act
# as that call's run (send to its chat, resolve its files).
current_call: contextvars.ContextVar = contextvars.ContextVar("nekro_call", default="")
# The AgentCtx of that call (for helpers that take only a chat key).
current_ctx: contextvars.ContextVar = contextvars.ContextVar("nekro_ctx", default=None)


class HostError(Exception):
    """nekro refused or could not complete a request."""


class Link:
    def __init__(self, sock):
        self._sock = sock
        self._wlock = threading.Lock()
        self._reqs = itertools.count(1)
        self._waiting: dict = {}  # req -> (loop, future)
        self._wait_lock = threading.Lock()
        self.writer = None  # the event loop's stream, once it serves the socket

    def send(self, msg: dict, default=None) -> None:
        encode = _encoders.get(default)
        if encode is None:
            encode = _encoders[default] = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=default,
                                                           allow_nan=False).encode
        try:
            data = (encode(msg) + "\n").encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: escaped, nekro reads U+FFFD
            data = (json.dumps(msg, separators=(",", ":"), default=default, allow_nan=False) + "\n").encode("ascii")
        writer = self.writer
        if writer is None:  # before the event loop serves the socket
            with self._wlock:
                self._sock.sendall(data)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is _loop:
            writer.write(data)
        else:
            _loop.call_soon_threadsafe(writer.write, data)

    async def request(self, op: str, **args):
        """Ask nekro for op and wait for its answer."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        req = next(self._reqs)
        with self._wait_lock:
            self._waiting[req] = (loop, fut)
        self.send({"req": req, "op": op, "call": current_call.get(), "args": args})
        return await fut

    def request_sync(self, op: str, **args):
        """request, for code that runs outside the event loop (a thread)."""
        loop = _loop
        if loop is None:
            raise HostError("the plugin host is not running")
        return asyncio.run_coroutine_threadsafe(self.request(op, **args), loop).result()

    def answered(self, msg: dict) -> None:
        with self._wait_lock:
            entry = self._waiting.pop(msg.get("req"), None)
        if entry is None:
            return
        loop, fut = entry

        def settle():
            if fut.done():
                return
            if msg.get("error"):
                fut.set_exception(HostError(msg["error"]))
            else:
                fut.set_result(msg.get("result"))

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            settle()
        else:
            loop.call_soon_threadsafe(settle)

    def fail_all(self, why: str) -> None:
        with self._wait_lock:
            waiting, self._waiting = self._waiting, {}
        for loop, fut in waiting.values():
            loop.call_soon_threadsafe(lambda f=fut: f.done() or f.set_exception(HostError(why)))


link: Link | None = None
# Link.send's encoders by their default (json.dumps would make one per
# message, a tenth of a plugin call's cost).
_encoders: dict = {}
_loop: asyncio.AbstractEventLoop | None = None


def get() -> Link:
    if link is None:
        raise HostError("nekro_agent is used outside a nekro plugin host")
    return link
