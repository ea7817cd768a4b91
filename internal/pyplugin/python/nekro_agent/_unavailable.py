"""What the reference offers and nekro does not: importing works, using it
raises NotAvailableError naming what is not available and why.

A plugin that imports, say, the vector database's client or nonebot's bot
still loads; only the call that needs it fails, with a message the
operator can act on (and the AI sees as the call's error).
"""
from __future__ import annotations

from typing import Any


class NotAvailableError(RuntimeError):
    """A part of Nekro Agent that nekro does not provide (yet)."""


def fail(what: str, why: str):
    raise NotAvailableError("%s is not available in nekro: %s" % (what, why))


def function(what: str, why: str, is_async: bool = True):
    """A stand-in for a reference function: calling it raises."""
    if is_async:
        async def stub(*_a: Any, **_k: Any):
            fail(what, why)
    else:
        def stub(*_a: Any, **_k: Any):  # type: ignore[misc]
            fail(what, why)
    stub.__name__ = what.rsplit(".", 1)[-1].rstrip("()")
    stub.__doc__ = "Not available in nekro: %s" % why
    return stub


class Service:
    """A stand-in for a reference service object (timer_service,
    plugin_collector, ...): every attribute is a function that raises
    when called (awaited or not)."""

    def __init__(self, what: str, why: str, **known: Any):
        object.__setattr__(self, "_what", what)
        object.__setattr__(self, "_why", why)
        for k, v in known.items():
            object.__setattr__(self, k, v)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Call("%s.%s()" % (self._what, name), self._why)

    def __repr__(self) -> str:
        return "<%s: not available in nekro>" % self._what


class _Call:
    """Raises when called; what it returns raises when awaited too (the
    reference's methods are mostly coroutines)."""

    def __init__(self, what: str, why: str):
        self.what, self.why = what, why

    def __call__(self, *_a: Any, **_k: Any):
        fail(self.what, self.why)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Call("%s.%s" % (self.what.rstrip("()"), name), self.why)

    def __repr__(self) -> str:
        return "<%s: not available in nekro>" % self.what


def module_getattr(module: str, why: str):
    """A module's __getattr__: any name the reference's module has and
    this one lacks is a stand-in that raises when called (its attributes
    too: a submodule's functions)."""

    def __getattr__(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Call("%s.%s" % (module, name), why)

    return __getattr__


class ServiceClass(type):
    """A metaclass for stand-ins of reference classes used through their
    static methods (WorkspaceService.x(...)): a method the class lacks is a
    stand-in that raises when called. The class says what and why in
    _what and _why."""

    def __getattr__(cls, name: str):
        if name.startswith("__") or name in ("_what", "_why"):
            raise AttributeError(name)
        return _Call("%s.%s()" % (cls.__dict__.get("_what", cls.__name__), name), cls.__dict__.get("_why", ""))
