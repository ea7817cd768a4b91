"""The process nekro runs for one Python plugin:
python3 -m nekro_agent._host PATH FD [ENV_DIR [INDEX]].

It imports the plugin from PATH (a .py file or a package directory),
describes it to nekro over the socket on descriptor FD, then serves
nekro's calls (sandbox methods, hooks) concurrently: coroutine functions
as tasks on one event loop, plain functions on worker threads.
"""
from __future__ import annotations

import asyncio
import base64
import collections.abc
import contextvars
import importlib.util
import inspect
import json
import os
import re
import socket
import sys
import traceback
import types
import typing

from nekro_agent import _config, _deps, _link, _web
from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType
from nekro_agent.api.schemas import AgentCtx


# The package plugins are imported under, as the reference imports them
# under its plugin directory's package (workdir.NAME): a plugin named
# like a standard module (email, status) does not shadow it.
PLUGINS_PACKAGE = "nekro_plugins"


def load(path: str):
    """Import the plugin module at path and return its `plugin`."""
    path = os.path.abspath(path)
    if PLUGINS_PACKAGE not in sys.modules:
        parent = types.ModuleType(PLUGINS_PACKAGE)
        parent.__path__ = []
        sys.modules[PLUGINS_PACKAGE] = parent
    if os.path.isdir(path):
        name = PLUGINS_PACKAGE + "." + os.path.basename(path)
        spec = importlib.util.spec_from_file_location(name, os.path.join(path, "__init__.py"),
                                                      submodule_search_locations=[path])
    else:
        name = PLUGINS_PACKAGE + "." + os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError("%s is not a Python module or package" % path)
    tried: set = set()
    while True:
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
            break
        except ModuleNotFoundError as e:
            for m in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
                del sys.modules[m]
            need = _deps.reference_requirement(e.name or "")
            if need is None or need in tried:
                raise
            # A package the reference's nekro-agent provides its plugins:
            # installed into this plugin's environment, then imported again.
            tried.add(need)
            _install_reference_package(need, e.name or "")
        except BaseException:
            sys.modules.pop(name, None)
            raise
    plugin = getattr(module, "plugin", None)
    if plugin is None:
        raise MissingPluginInstance("%s defines no module-level `plugin`" % path)
    if not isinstance(plugin, NekroPlugin):
        raise InvalidPluginType("`plugin` in %s is a %s, not a NekroPlugin" % (path, type(plugin).__name__))
    return plugin


def _install_reference_package(requirement: str, module: str) -> None:
    """Install requirement (a dependency of the reference's nekro-agent the
    plugin imports as module) into the plugin's own environment; an
    ImportError naming the plugin, the package and --python-index when it
    cannot be."""
    from nekro_agent.api import plugin as plugin_api

    if _link.link is not None:
        _link.link.send({"op": "log", "level": "info",
                         "msg": "plugin imports %s, which Nekro Agent provides its plugins: installing %s into the "
                                "plugin's own environment" % (module, requirement)})
    plugin_api._packages.install(requirement)


class MissingPluginInstance(LookupError):
    """The plugin's module defines no `plugin` (the reference's name)."""


class InvalidPluginType(TypeError):
    """The plugin's `plugin` is not a NekroPlugin (the reference's name)."""


async def load_in_loop(path: str):
    """load, run inside the event loop as the reference imports plugins
    (module-level code may create tasks or ask for the running loop)."""
    return load(path)


async def _in_loop(func, *args):
    """func(*args), run inside the event loop (as the reference runs it)."""
    return func(*args)


def where(err: BaseException, path: str) -> dict:
    """Where a plugin's import failed: the innermost line of the plugin's
    own files in the traceback (a syntax error's own line; none when the
    plugin's code is not in it); with the traceback, as the reference's
    failed-plugin registry keeps it."""
    root = os.path.abspath(path)
    if not os.path.isdir(root):
        root = os.path.dirname(root)
    file, line = "", 0
    if isinstance(err, SyntaxError) and err.filename:
        file, line = err.filename, err.lineno or 0
    else:
        frames = traceback.extract_tb(err.__traceback__)
        own = [f for f in frames if os.path.abspath(f.filename).startswith(root + os.sep)]
        if own:
            file, line = own[-1].filename, own[-1].lineno or 0
    tb = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    return {"error_type": type(err).__name__, "file": file, "line": line, "traceback": tb[-4000:]}


def type_name(ann) -> str:
    """The Python type hint as text, as the stub and the prompt show it."""
    if ann is inspect.Parameter.empty or ann is inspect.Signature.empty:
        return "Any"
    if isinstance(ann, str):
        return ann
    if ann is type(None):
        return "None"
    if isinstance(ann, type) and not typing.get_args(ann):
        return ann.__name__
    text = repr(ann)
    for prefix in ("typing.", "collections.abc."):
        text = text.replace(prefix, "")
    return text


def describe(plugin: NekroPlugin) -> dict:
    methods = []
    for func, kind, name, description in plugin.sandbox_methods:
        sig = inspect.signature(func)
        params = []
        for i, p in enumerate(sig.parameters.values()):
            if i == 0:
                continue  # _ctx: the host's, not the AI's
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            d = {"name": p.name, "py_type": type_name(p.annotation), "optional": p.default is not p.empty}
            if p.default is not p.empty:
                d["default_py"] = repr(p.default)
            params.append(d)
        methods.append({
            "name": func.__name__, "type": kind.value, "display_name": name,
            "description": description or name, "doc": inspect.getdoc(func) or "",
            "params": params, "result": type_name(sig.return_annotation),
        })
    return {
        "plugin": {"name": plugin.name, "module_name": plugin.module_name, "author": plugin.author,
                   "version": plugin.version, "description": plugin.description, "url": plugin.url},
        "methods": methods,
        "config": _config.describe(plugin.config_class) if plugin.config_class is not None else None,
        "commands": [describe_command(name, f, meta) for name, f, meta in plugin.commands],
        "hooks": {"init": plugin.init_method is not None, "cleanup": plugin.cleanup_method is not None,
                  "reset": plugin.on_reset_method is not None,
                  "prompt_inject": plugin.prompt_inject_method is not None,
                  "collect_methods": plugin.collect_methods_method is not None,
                  "user_message": plugin.user_message_method is not None,
                  "system_message": plugin.system_message_method is not None,
                  "enabled": bool(plugin.enabled_callbacks), "disabled": bool(plugin.disabled_callbacks)},
    }


# The reference's command permissions as nekro's: ADVANCED is the chat's
# admins (and super users), SUPER_USER the operator's --super-users.
_PERMISSIONS = {"public": "public", "user": "user", "advanced": "admin", "super_user": "super"}


def describe_command(name: str, func, meta: dict) -> dict:
    """A mounted command as nekro's command system lists it: its
    permission in nekro's terms, its usage ("/name ..." made from its
    parameters when the plugin gave none), internal ones hidden from
    /help."""
    from nekro_agent.schemas.i18n import get_system_lang, get_text, resolve_i18n
    from nekro_agent.services.command.base import CommandPermission
    from nekro_agent.services.command.parser import ArgumentParser

    perm = meta.get("permission") or CommandPermission.PUBLIC
    perm = CommandPermission(getattr(perm, "value", perm))  # an unknown level fails the plugin's load
    lang = get_system_lang()
    usage = get_text(meta.get("i18n_usage"), resolve_i18n(meta.get("usage") or ""), lang).strip()
    if not usage:
        usage = ArgumentParser.usage(func, name)
    elif not usage.startswith("/"):
        usage = "/" + usage
    description = get_text(meta.get("i18n_description"), resolve_i18n(meta.get("description") or ""), lang)
    return {"name": name, "description": description.strip(), "aliases": [str(a) for a in meta.get("aliases") or []],
            "permission": _PERMISSIONS[perm.value], "usage": usage, "hidden": bool(meta.get("internal"))}


_SIMPLE = {int: "int", float: "float", str: "str", bool: "bool", bytes: "bytes", list: "list", dict: "dict"}


def py_name(v) -> str:
    return "None" if v is None else type(v).__name__


def type_mismatch(ann, v):
    """The expected type's name when v does not fit the annotation ann, as
    the Go SDK checks arguments; None when it fits or ann is not checked
    (anything but the JSON types and Optional/List/Dict of them)."""
    if isinstance(ann, str):
        ann = {"int": int, "float": float, "str": str, "bool": bool, "bytes": bytes, "list": list, "dict": dict}.get(ann, None)
        if ann is None:
            return None
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Union:
        if v is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return type_mismatch(inner[0], v)
        return None
    base = origin if origin in (list, dict) else ann
    if base not in _SIMPLE:
        return None
    name = _SIMPLE[base]
    if base is bool:
        return None if isinstance(v, bool) else name
    if base is int:
        return None if isinstance(v, int) and not isinstance(v, bool) else name
    if base is float:
        return None if isinstance(v, (int, float)) and not isinstance(v, bool) else name
    return None if isinstance(v, base) else name


def to_json_value(v):
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    if isinstance(v, (set, frozenset, tuple)):
        return list(v)
    if hasattr(v, "model_dump"):
        return v.model_dump()
    if hasattr(v, "dict") and callable(v.dict):
        return v.dict()
    raise TypeError("a %s cannot be returned to the sandbox" % type(v).__name__)


class _Method:
    """A sandbox method as the host calls it, with what each call checks
    worked out once (binding its parameters, their types)."""

    __slots__ = ("func", "kind", "sig", "as_bytes", "is_async", "checks", "as_text", "multimodal",
                 "fast", "names", "required", "any_keyword")

    def __init__(self, func, kind, sig, as_bytes, is_async, checks):
        self.func, self.kind, self.sig, self.as_bytes, self.is_async, self.checks = func, kind, sig, as_bytes, is_async, checks
        self.as_text = kind in (SandboxMethodType.AGENT, SandboxMethodType.BEHAVIOR)
        self.multimodal = kind == SandboxMethodType.MULTIMODAL_AGENT
        params = list(sig.parameters.values())
        P = inspect.Parameter
        # binds answers for the usual signature (the context first, then
        # parameters by name); anything else goes through Signature.bind.
        self.fast = bool(params) and params[0].kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD) and \
            all(p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY, P.VAR_POSITIONAL, P.VAR_KEYWORD) for p in params[1:])
        rest = params[1:]
        self.names = frozenset(p.name for p in rest if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY))
        self.required = frozenset(p.name for p in rest
                                  if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY) and p.default is p.empty)
        self.any_keyword = any(p.kind == P.VAR_KEYWORD for p in rest)

    def binds(self, args: dict) -> bool:
        """Whether func(ctx, **args) surely binds (False: ask
        Signature.bind, which says why not, or binds after all)."""
        if not self.fast:
            return False
        keys = args.keys()
        if not self.any_keyword and not keys <= self.names:
            return False
        return self.required <= keys


def compile_check(ann):
    """type_mismatch(ann, v) as a function of v, the common annotations
    (int, str, float, bool, Optional of them) without type_mismatch's walk."""
    inner, allow_none = ann, False
    if isinstance(ann, str):
        inner = {"int": int, "float": float, "str": str, "bool": bool, "bytes": bytes, "list": list, "dict": dict}.get(ann)
        if inner is None:
            return lambda v: None
    elif typing.get_origin(ann) is typing.Union:
        args = typing.get_args(ann)
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1:
            return lambda v: type_mismatch(ann, v)
        inner, allow_none = rest[0], type(None) in args
    if inner is int:
        return lambda v: None if (type(v) is int or (isinstance(v, int) and not isinstance(v, bool))) or (v is None and allow_none) else "int"
    if inner is str:
        return lambda v: None if type(v) is str or isinstance(v, str) or (v is None and allow_none) else "str"
    return lambda v: type_mismatch(ann, v)


class Host:
    def __init__(self, plugin: NekroPlugin, link: _link.Link, loop: asyncio.AbstractEventLoop, app=None):
        self.plugin = plugin
        self.link = link
        self.loop = loop
        self.web = _web.Web(app, link, plugin.key)  # the plugin's router (mount_router)
        self.methods = {}
        for func, kind, _n, _d in plugin.sandbox_methods:
            sig = inspect.signature(func)
            params = list(sig.parameters.values())[1:]
            as_bytes = [p.name for p in params if p.annotation in (bytes, "bytes")]
            # A None default makes None acceptable whatever the annotation
            # says (`tags: list = None`, as the documents write it).
            checks = [(p.name, p.annotation) for p in params
                      if p.annotation is not p.empty and not (p.default is None)] + \
                     [(p.name, typing.Optional[p.annotation]) for p in params
                      if p.annotation is not p.empty and p.default is None and not isinstance(p.annotation, str)]
            self.methods[func.__name__] = _Method(func, kind, sig, as_bytes, inspect.iscoroutinefunction(func),
                                                  [(n, compile_check(a)) for n, a in checks])
        self.commands = {name: func for name, func, _meta in plugin.commands}
        self.enabled = False  # on_enabled ran (at init, or on "enabled") and on_disabled did not since

    async def state_changed(self, on: bool) -> None:
        """Run the on_enabled or on_disabled callbacks when the plugin's
        state changes, as the reference's enable()/disable() do: enabling
        an enabled plugin (its init ran them already) runs nothing."""
        if self.enabled == on:
            return
        self.enabled = on
        for f in (self.plugin.enabled_callbacks if on else self.plugin.disabled_callbacks):
            await self.run(f)

    async def run(self, func, *args, call: str = ""):
        token = _link.current_call.set(call)
        try:
            if inspect.iscoroutinefunction(func):
                return await func(*args)
            ctx = contextvars.copy_context()
            return await self.loop.run_in_executor(None, lambda: ctx.run(func, *args))
        finally:
            _link.current_call.reset(token)

    async def handle(self, msg: dict) -> None:
        mid, op, a = msg.get("id"), msg.get("op"), msg.get("args") or {}
        try:
            if op == "call":
                result = await self.call(a, msg.get("call", ""))
            elif op == "http":
                if await self.web.serve(mid, a):
                    return  # answered in full: nekro has closed the request
                result = None
            elif op == "command":
                result = await self.command(a, msg.get("call", ""))
            elif op == "ready":
                self.plugin._data_dir = a.get("data_dir")
                from nekro_agent.core.config import config as core_config

                core_config.MEMORY_ENABLE_SYSTEM = bool(a.get("memory"))  # nekro serve --memory
                if a.get("config") is not None and self.plugin.config_class is not None:
                    self.plugin._config_holder.update(a["config"], a.get("config_version", 0))
                result = None
            elif op == "init":
                result = None
                if self.plugin.init_method:
                    await self.run(self.plugin.init_method)
                # The reference runs an enabled plugin's on_enabled callbacks
                # when it loads it; nekro inits only enabled plugins.
                await self.state_changed(True)
            elif op == "cleanup":
                result = None
                if self.plugin.cleanup_method:
                    await self.run(self.plugin.cleanup_method)
            elif op == "reset":
                result = None
                f = self.plugin.on_reset_method
                if f:
                    args = (AgentCtx(from_chat_key=a.get("chat_key")),) if inspect.signature(f).parameters else ()
                    await self.run(f, *args)
            elif op in ("enabled", "disabled"):
                result = None
                await self.state_changed(op == "enabled")
            elif op == "system_message":
                result = 0
                f = self.plugin.system_message_method
                if f:
                    signal = await self.run(f, AgentCtx(from_chat_key=a.get("chat_key")), a.get("text") or "")
                    result = 0 if signal is None else int(getattr(signal, "value", signal))
            elif op == "user_message":
                result = 0
                f = self.plugin.user_message_method
                if f:
                    from nekro_agent.schemas.chat_message import ChatMessage

                    ctx = AgentCtx(from_chat_key=a.get("chat_key"), from_user_id=a.get("user_id"))
                    msg = ChatMessage(chat_key=a.get("chat_key") or "", sender_id=a.get("user_id") or "",
                                      sender_name=a.get("user_id") or "", content_text=a.get("text") or "")
                    signal = await self.run(f, ctx, msg)
                    result = 0 if signal is None else int(getattr(signal, "value", signal))
            elif op in ("prompt_inject", "collect_methods"):
                f = self.plugin.prompt_inject_method if op == "prompt_inject" else self.plugin.collect_methods_method
                result = None
                if f:
                    ctx = AgentCtx(from_chat_key=a.get("chat_key"), from_user_id=a.get("user_id"))
                    # The hook may read its chat's knowledge and memories
                    # (kb_tools' prompt lists the chat's documents).
                    ctx_token = _link.current_ctx.set(ctx)
                    try:
                        result = await self.run(f, ctx, call=msg.get("call", ""))
                    finally:
                        _link.current_ctx.reset(ctx_token)
                    if op == "prompt_inject":
                        result = "" if result is None else str(result)
                    else:
                        result = [getattr(m, "__name__", m) if not isinstance(m, str) else m for m in (result or [])]
            else:
                raise ValueError("unknown operation %r" % op)
            self.link.send({"id": mid, "result": result}, default=to_json_value)
        except _ArgumentError as e:
            self.link.send({"id": mid, "error": {"type": "argument", "message": str(e)}})
        except BaseException as e:  # a plugin's failure is its call's error, never the host's end
            tb = traceback.format_exception(type(e), e, e.__traceback__)
            self.link.send({"id": mid, "error": {"type": "plugin", "message": "%s: %s" % (type(e).__name__, e),
                                                 "traceback": "".join(tb)[-4000:]}})

    async def call(self, msg: dict, call: str):
        name = msg.get("method")
        m = self.methods.get(name)
        if m is None:
            raise _ArgumentError("%s(): no such method in plugin %s" % (name, self.plugin.key))
        c = msg.get("ctx") or {}
        version = c.get("config_version")
        if version is not None and self.plugin.config_class is not None and version != self.plugin._config_holder.version:
            await self.refresh_config(version)
        ctx = AgentCtx(c.get("chat_key"), c.get("container_key"), c.get("user_id"), c.get("run_id", ""), call,
                       c.get("shared_path", ""), c.get("upload_path", ""))
        args = msg.get("args") or {}
        for pname in m.as_bytes:
            if isinstance(args.get(pname), str):
                try:
                    args[pname] = base64.b64decode(args[pname], validate=True)
                except ValueError:
                    raise _ArgumentError("%s(): argument '%s' must be bytes (sent base64-encoded)" % (name, pname))
        if not m.binds(args):
            try:
                m.sig.bind(ctx, **args)
            except TypeError as e:
                raise _ArgumentError("%s(): %s" % (name, e)) from None
        for pname, check in m.checks:
            if pname in args:
                want = check(args[pname])
                if want:
                    raise _ArgumentError("%s(): argument '%s' must be %s, got %s" % (name, pname, want, py_name(args[pname])))
        func = m.func
        token, ctx_token = _link.current_call.set(call), _link.current_ctx.set(ctx)
        try:
            if m.is_async:
                result = await func(ctx, **args)
            else:
                cv = contextvars.copy_context()
                result = await self.loop.run_in_executor(None, lambda: cv.run(func, ctx, **args))
        except BaseException:
            if ctx._stage is not None:  # what the method wrote before it failed still reaches the sandbox
                await self.loop.run_in_executor(None, _close_quietly, ctx._stage)
            raise
        finally:
            _link.current_ctx.reset(ctx_token)
            _link.current_call.reset(token)
        if ctx._stage is not None:  # the method's files reach /app/shared; a refusal fails the call
            await self.loop.run_in_executor(None, ctx._stage.close)
        if m.as_text:
            return result if isinstance(result, str) else str(result)
        if m.multimodal and isinstance(result, dict) and isinstance(result.get("content"), list):
            return result["content"]
        return result

    async def refresh_config(self, version) -> None:
        """Fetch the plugin's settings when nekro's version differs from
        the one the process holds (the operator changed a setting)."""
        if version is not None and self.plugin.config_class is not None and version != self.plugin._config_holder.version:
            answer = await self.link.request("config.get")
            self.plugin._config_holder.update(answer["values"], answer["version"])

    async def command(self, msg: dict, call: str) -> dict:
        """Run a chat command as the reference's command system does: its
        arguments parsed from the text by the function's Arg declarations,
        then the function, whose CommandResponses (returned, or yielded one
        after another) are the answer. A ValueError is an invalid argument;
        any other exception the command's error."""
        from nekro_agent.api.schemas import split_chat_key
        from nekro_agent.schemas.i18n import get_system_lang, t
        from nekro_agent.services.command.parser import ArgumentParser
        from nekro_agent.services.command.schemas import CommandExecutionContext, CommandResponseStatus as Status

        name = msg.get("name")
        func = self.commands.get(name)
        if func is None:
            raise _ArgumentError("no command %r in plugin %s" % (name, self.plugin.key))
        c = msg.get("ctx") or {}
        await self.refresh_config(c.get("config_version"))
        chat_key, user_id = c.get("chat_key") or "", c.get("user_id") or ""
        context = CommandExecutionContext(
            user_id=user_id, chat_key=chat_key, username=c.get("user_name") or user_id,
            adapter_key=split_chat_key(chat_key)[0] or "", is_super_user=bool(c.get("super_user")),
            is_advanced_user=bool(c.get("admin") or c.get("super_user")), lang=get_system_lang())
        out: list = []
        budget = [MAX_SEGMENT_BYTES]

        def add(status, message, segments=None, r=None) -> None:
            view = {"status": getattr(status, "value", status), "message": message_text(message),
                    "segments": [segment_view(s, budget) for s in segments or []]}
            if r is not None and getattr(r, "callback_cmd", None):  # CmdCtl.wait
                view["wait"] = {"callback_cmd": r.callback_cmd, "options": [str(o) for o in r.wait_options or []],
                                "timeout": float(r.wait_timeout or 60), "on_timeout_message":
                                    message_text(r.on_timeout_message) if r.on_timeout_message else
                                    t(zh_CN="操作超时，已取消", en_US="Timed out; cancelled."),
                                "context_data": {str(k): str(v) for k, v in (r.context_data or {}).items()}}
            out.append(view)

        token = _link.current_call.set(call)
        ctx_token = _link.current_ctx.set(AgentCtx(from_chat_key=chat_key, from_user_id=user_id, call=call))
        try:
            try:
                kwargs = ArgumentParser.parse(func, msg.get("args") or "")
            except ValueError as e:
                add(Status.INVALID_ARGS, "%s (usage: %s)" % (e, msg.get("usage") or "/" + name))
                return {"responses": out}
            try:
                if inspect.isasyncgenfunction(func):
                    result = func(context, **kwargs)
                elif inspect.iscoroutinefunction(func):
                    result = await func(context, **kwargs)
                else:
                    cv = contextvars.copy_context()
                    result = await self.loop.run_in_executor(None, lambda: cv.run(func, context, **kwargs))
                    if inspect.isawaitable(result):
                        result = await result
                if inspect.isasyncgen(result):
                    async for r in result:
                        add(r.status, r.message, r.output_segments, r)
                elif result is not None and hasattr(result, "status"):
                    add(result.status, result.message, result.output_segments, result)
                elif result is not None:
                    add(Status.SUCCESS, result)
            except ValueError as e:
                add(Status.INVALID_ARGS, t(zh_CN="参数错误: ", en_US="Invalid argument: ") + str(e))
            except Exception as e:  # noqa: BLE001 - the command's failure is its answer
                add(Status.ERROR, t(zh_CN="命令执行出错: ", en_US="Command execution error: ") + str(e))
        finally:
            _link.current_ctx.reset(ctx_token)
            _link.current_call.reset(token)
        return {"responses": out}


def message_text(message) -> str:
    from nekro_agent.schemas.i18n import resolve_i18n

    if message is None:
        return ""
    return resolve_i18n(message) if isinstance(message, (str, dict)) else str(message)


# How many bytes of image and file segments one command answer carries:
# their content crosses the plugin's connection as base64 in one line.
MAX_SEGMENT_BYTES = 8 << 20


def segment_view(seg, budget: list) -> dict:
    """A command output segment as nekro gets it: text, or an image or
    file with its content read here (left out, and the file only named,
    when it cannot be read or would take the answer over budget[0]
    bytes)."""
    kind = getattr(getattr(seg, "type", "text"), "value", "text")
    path = getattr(seg, "file_path", None) or ""
    view = {"type": kind, "text": getattr(seg, "text", "") or "",
            "file_name": getattr(seg, "file_name", None) or os.path.basename(path)}
    if kind != "text" and path:
        try:
            size = os.path.getsize(path)
            if size <= budget[0]:
                with open(path, "rb") as f:
                    data = f.read(budget[0] + 1)
                if len(data) <= budget[0]:
                    budget[0] -= len(data)
                    view["data"] = base64.b64encode(data).decode("ascii")
        except OSError:
            pass
    return view


class _ArgumentError(Exception):
    pass


def _close_quietly(stage) -> None:
    try:
        stage.close()
    except Exception:  # noqa: BLE001 - the method's own error is the call's
        pass


def main() -> None:
    path, fd = sys.argv[1], int(sys.argv[2])
    # python -m puts the working directory (the plugin directory) first on
    # sys.path: last instead, so a plugin named like a standard module
    # (email) does not shadow it, and its siblings still import.
    here = os.getcwd()
    for entry in [p for p in sys.path if p in ("", here)]:
        sys.path.remove(entry)
        sys.path.append(entry)
    env_dir = sys.argv[3] if len(sys.argv) > 3 else ""
    from nekro_agent.api import plugin as _plugin_api

    _plugin_api._packages.configure(env_dir, sys.argv[4] if len(sys.argv) > 4 else "")
    _plugin_api._plugins_root = sys.argv[5] if len(sys.argv) > 5 else ""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fd)
    link = _link.Link(sock)
    _link.link = link
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        from nekro_agent import _compat

        _compat.apply()
        plugin = loop.run_until_complete(load_in_loop(path))
        hello = describe(plugin)
        app = loop.run_until_complete(_in_loop(_web.build_app, plugin))
        hello["router"] = app is not None
    except BaseException as e:
        link.send({"op": "hello", "error": "%s: %s" % (type(e).__name__, e), **where(e, path)})
        return
    link.send({"op": "hello", **hello})
    missing = plugin.not_served()
    if missing:
        link.send({"op": "log", "level": "warning",
                   "msg": "plugin %s declares %s: nekro does not serve these for Python plugins yet "
                          "(the plugin's sandbox methods and hooks work)" % (plugin.key, "; ".join(missing))})

    _link._loop = loop
    host = Host(plugin, link, loop, app)
    loop.run_until_complete(serve(host, link, sock))


def start_task(coro, loop: asyncio.AbstractEventLoop):
    """Run coro as an asyncio Task of its own (its own copy of the
    context), so what plugins use works inside it as in the reference:
    asyncio.current_task(), asyncio.timeout(), httpx and the other
    anyio-based libraries, task-local context variables.

    The task starts eagerly: its first step runs now, as the task, so a
    call that never waits is answered in this event-loop pass, not the
    next (Python 3.12's eager_start; before 3.12 by hand, _Started).
    Returns the task, or None when it has finished already."""
    ctx = contextvars.copy_context()
    if _EAGER:
        t = asyncio.Task(coro, loop=loop, context=ctx, eager_start=True)
        return None if t.done() else t
    started = _Started(coro)
    t = loop.create_task(started, context=ctx)
    try:
        _enter_task(loop, t)
    except RuntimeError:  # called inside another task: t takes its first step on the loop
        started.first = None
        return t
    try:
        started.first = ctx.run(_first_step, coro)
    finally:
        _leave_task(loop, t)
    return t if started.first[0] is _YIELDED else None


_EAGER = sys.version_info >= (3, 12)
_enter_task, _leave_task = asyncio.tasks._enter_task, asyncio.tasks._leave_task
_YIELDED, _RETURNED, _RAISED = object(), object(), object()


def _first_step(coro):
    """The first step of coro: what it yielded, returned or raised."""
    try:
        return _YIELDED, coro.send(None)
    except StopIteration as e:
        return _RETURNED, e.value
    except BaseException as e:  # noqa: BLE001 - the task raises it in its own step
        return _RAISED, e


class _Started(collections.abc.Coroutine):
    """A coroutine whose first step start_task ran already, as its Task
    (current_task() was the Task, in the Task's context). The Task's own
    first step takes up from there: it gets what that step yielded (the
    future the coroutine waits on), its result or its exception; later
    steps go to the coroutine itself."""

    __slots__ = ("coro", "first", "__name__")

    def __init__(self, coro):
        self.coro = coro
        self.__name__ = getattr(coro, "__qualname__", "coroutine")  # the Task's repr names the coroutine
        self.first = None  # (kind, value) of the step taken; None once the Task took it up

    def send(self, value):
        first = self.first
        if first is None:
            return self.coro.send(value)
        self.first = None
        kind, v = first
        if kind is _YIELDED:
            return v
        if kind is _RETURNED:
            raise StopIteration(v)
        raise v

    def throw(self, typ, val=None, tb=None):
        first, self.first = self.first, None
        if first is not None and first[0] is not _YIELDED:  # finished: the task was cancelled as it ended
            raise typ if val is None else val
        if val is None and tb is None:
            return self.coro.throw(typ)
        return self.coro.throw(typ, val, tb)

    def close(self):
        self.first = None
        return self.coro.close()

    def __await__(self):
        return self.coro.__await__()


class _Protocol(asyncio.BufferedProtocol):
    """Reads nekro's lines into one reused buffer and starts each request
    at once. A buffered protocol, not asyncio.Protocol: that one reads
    into a fresh 256 KiB bytes object per receive, which cost about 100 µs
    a call here (malloc maps and unmaps it every time)."""

    def __init__(self, host: Host, link: _link.Link, done: asyncio.Future):
        self.host, self.link, self.done = host, link, done
        self.buf = bytearray(64 << 10)
        self.n = 0  # bytes of buf holding unread data
        self.tasks = set()

    def connection_made(self, transport):
        self.link.writer = transport

    def get_buffer(self, sizehint: int):
        if self.n == len(self.buf):  # a line longer than the buffer: grow it
            grown = bytearray(2 * len(self.buf))
            grown[:self.n] = self.buf
            self.buf = grown
        return memoryview(self.buf)[self.n:]

    def buffer_updated(self, nbytes: int) -> None:
        self.n += nbytes
        start = 0
        while True:
            i = self.buf.find(b"\n", start, self.n)
            if i < 0:
                break
            line = self.buf[start:i]
            start = i + 1
            try:
                self.dispatch(line)
            except Exception as e:  # noqa: BLE001 - no line ends the host
                try:
                    _answer_unreadable(self.link, line, e)
                except Exception:  # noqa: BLE001
                    pass
        if start:
            rest = self.n - start
            self.buf[:rest] = self.buf[start:self.n]
            self.n = rest
            if rest == 0 and len(self.buf) > 64 << 10:  # shrink after a long line
                self.buf = bytearray(64 << 10)

    def dispatch(self, line) -> None:
        """Decode one line from nekro and start what it asks. Bad UTF-8 is
        read as U+FFFD, as Go reads it for Go plugins."""
        msg = json.loads(line.decode("utf-8", "replace"))
        if not isinstance(msg, dict):
            raise ValueError("a %s, not a JSON object" % type(msg).__name__)
        if "req" in msg and "op" not in msg:
            self.link.answered(msg)
        elif msg.get("op") in ("http.ack", "http.cancel"):
            self.host.web.control(msg)
        else:
            t = start_task(self.host.handle(msg), self.host.loop)
            if t is not None:
                self.tasks.add(t)
                t.add_done_callback(self.tasks.discard)

    def connection_lost(self, exc) -> None:
        self.link.fail_all("nekro closed the connection")
        if not self.done.done():
            self.done.set_result(None)


_LEADING_ID = re.compile(rb'^\s*\{\s*"(id|req)"\s*:\s*(-?\d{1,18})\s*[,}]')


def _answer_unreadable(link: _link.Link, line, err: BaseException) -> None:
    """Fail the one request a line nekro sent could not be read for (too
    deep, too large for memory, not an object...): nekro puts "id" (or, in
    answers, "req") first, so the request is known without decoding the
    rest. The host goes on serving the others."""
    why = "%s: %s" % (type(err).__name__, str(err)[:200])
    m = _LEADING_ID.match(bytes(line[:64]))
    if m is None:
        link.send({"op": "log", "level": "warning", "msg": "nekro_agent: dropped an unreadable line from nekro (%s)" % why})
        return
    n = int(m.group(2))
    if m.group(1) == b"req":
        link.answered({"req": n, "error": "the answer could not be read: " + why})
        return
    link.send({"id": n, "error": {"type": "argument", "message": "the request could not be read: " + why}})


async def serve(host: Host, link: _link.Link, sock) -> None:
    """Serve nekro's requests on the event loop until nekro hangs up."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    await loop.connect_accepted_socket(lambda: _Protocol(host, link, done), sock=sock)
    await done


if __name__ == "__main__":
    main()
