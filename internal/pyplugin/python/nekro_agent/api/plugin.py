"""NekroPlugin and what goes with it, as the plugin documents use them."""
from __future__ import annotations

import enum
import importlib
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Literal, Optional

from nekro_agent import _config, _link
from nekro_agent._config import ConfigBase, ExtraField
from nekro_agent.core import logger as _core_logger

__all__ = ["Arg", "AsyncTaskHandle", "CmdCtl", "CommandExecutionContext", "CommandGroup", "CommandPermission",
           "CommandResponse", "ConfigBase", "ExtraField", "NekroPlugin", "PluginStore", "SandboxMethod",
           "SandboxMethodType", "TaskCtl", "TaskRunner", "TaskSignal", "dynamic_import_pkg", "task"]

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SandboxMethodType(str, enum.Enum):
    """What happens to a method's result (see the plugin documents)."""

    TOOL = "tool"
    AGENT = "agent"
    BEHAVIOR = "behavior"
    MULTIMODAL_AGENT = "multimodal_agent"


class PluginStore:
    """plugin.store: the plugin's KV namespace in nekro's database.

    The value a Python plugin writes is the value `nekro kv` and Go code
    read. Scopes: chat_key alone, user_key alone (across chats), both, or
    neither (the plugin's own).
    """

    def __init__(self, plugin: "NekroPlugin"):
        self._plugin = plugin

    async def set(self, chat_key: str = "", user_key: str = "", store_key: str = "", value: str = "") -> Literal[0, 1]:
        """Store value; returns 0 when the key was created, 1 when updated."""
        if not isinstance(value, str):
            raise TypeError("store value must be a str, not %s (serialize it, e.g. with json.dumps)" % type(value).__name__)
        return await _link.get().request("store.set", chat_key=chat_key or "", user_key=user_key or "",
                                         store_key=store_key, value=value)

    async def get(self, chat_key: str = "", user_key: str = "", store_key: str = "") -> Optional[str]:
        """Return the value, or None when there is none."""
        return await _link.get().request("store.get", chat_key=chat_key or "", user_key=user_key or "", store_key=store_key)

    async def delete(self, chat_key: str = "", user_key: str = "", store_key: str = "") -> Literal[0, 1]:
        """Delete the key; returns 0 when it was deleted, 1 when there was none."""
        return await _link.get().request("store.delete", chat_key=chat_key or "", user_key=user_key or "",
                                         store_key=store_key)


class NekroPlugin:
    """A plugin: its metadata, sandbox methods and hooks.

    The module that defines it must bind it to a module-level name
    `plugin`; nekro loads it from a --plugin-dir directory.
    """

    def __init__(self, name: str, module_name: str, description: str, version: str, author: str, url: str,
                 support_adapter: Optional[list] = None, is_builtin: bool = False, is_package: bool = False,
                 **_ignored: Any):
        for what, v in (("module_name", module_name), ("author", author)):
            if not _NAME_RE.match(v or ""):
                raise ValueError("plugin %s %r must be letters, digits and _, not starting with a digit" % (what, v))
        self.name = name
        self.module_name = module_name
        self.description = (description or "").strip()
        self.version = (version or "").strip()
        self.author = author
        self.url = (url or "").strip()
        self.support_adapter = support_adapter or []
        self.sandbox_methods: list = []  # (func, SandboxMethodType, name, description)
        self.init_method: Optional[Callable] = None
        self.cleanup_method: Optional[Callable] = None
        self.on_reset_method: Optional[Callable] = None
        self.prompt_inject_method: Optional[Callable] = None
        self.collect_methods_method: Optional[Callable] = None
        self.user_message_method: Optional[Callable] = None
        self.system_message_method: Optional[Callable] = None
        self.enabled_callbacks: list = []
        self.disabled_callbacks: list = []
        self.config_class = None
        self._data_dir: Optional[str] = None
        self.logger = logging.getLogger("nekro_agent.plugin." + self.key)
        self.i18n_name = _ignored.get("i18n_name")
        self.i18n_description = _ignored.get("i18n_description")
        self._is_builtin, self._is_package = is_builtin, is_package
        self.commands: list = []  # (name, func, metadata dict): served as chat commands
        # The web router (mount_router), served by nekro_agent._web.
        self.router_factory: Optional[Callable] = None
        self._router = None
        self.webui_path = _ignored.get("webui_path")  # its /__webui__/ file pages are not served
        # What nekro does not serve yet is recorded (and said in its log
        # when the plugin loads): webhooks and asynchronous tasks.
        self.webhook_methods: dict = {}
        self.async_tasks: dict = {}
        global _current_plugin
        _current_plugin = self

    @property
    def key(self) -> str:
        return "%s.%s" % (self.author, self.module_name)

    # Decorators.

    def mount_sandbox_method(self, method_type: SandboxMethodType, name: str, description: str = ""):
        """Mount a sandbox method. The AI calls it by the Python function's
        name, without _ctx; name and description are for people."""

        def deco(func):
            self.sandbox_methods.append((func, SandboxMethodType(method_type), name, description))
            func._method_type = SandboxMethodType(method_type)
            return func

        return deco

    def mount_init_method(self):
        def deco(func):
            self.init_method = func
            return func

        return deco

    def mount_cleanup_method(self):
        def deco(func):
            self.cleanup_method = func
            return func

        return deco

    def mount_on_channel_reset(self):
        def deco(func):
            self.on_reset_method = func
            return func

        return deco

    def mount_prompt_inject_method(self, name: str = "", description: str = ""):
        """Text added to every turn's prompt in a chat while the plugin is
        enabled: async def f(_ctx) -> str (2 s and 4 KiB at most)."""

        def deco(func):
            self.prompt_inject_method = func
            return func

        return deco

    def on_enabled(self):
        """Callbacks run when the operator enables the plugin while nekro
        runs: async def f()."""

        def deco(func):
            self.enabled_callbacks.append(func)
            return func

        return deco

    def on_disabled(self):
        """Callbacks run when the operator disables the plugin while nekro
        runs: async def f()."""

        def deco(func):
            self.disabled_callbacks.append(func)
            return func

        return deco

    def mount_on_system_message(self):
        """A hook that sees every system message pushed into a chat before
        it is stored: async def f(_ctx, message: str) -> MsgSignal | None."""

        def deco(func):
            self.system_message_method = func
            return func

        return deco

    def mount_on_user_message(self):
        """A hook that sees every user message before it is stored:
        async def f(_ctx, message: ChatMessage) -> MsgSignal | None
        (2 s at most; a late or failing hook counts as CONTINUE)."""

        def deco(func):
            self.user_message_method = func
            return func

        return deco

    def mount_collect_methods(self):
        """Which of the plugin's methods a chat's AI sees and may call:
        async def f(_ctx) -> list of the plugin's method functions."""

        def deco(func):
            self.collect_methods_method = func
            return func

        return deco

    def mount_config(self):
        def deco(cls):
            if not (isinstance(cls, type) and issubclass(cls, ConfigBase)):
                raise TypeError("mount_config() needs a ConfigBase subclass, not %r" % (cls,))
            self.config_class = cls
            self._config_holder = _config.Holder(cls)
            return cls

        return deco

    def mount_command(self, name: str, description: str, aliases: Optional[list] = None, permission: Any = None,
                      usage: str = "", category: str = "plugin", tags: Optional[list] = None, internal: bool = False,
                      **i18n: Any):
        """Mount a chat command, /name, on nekro's command system (its
        prefix, permissions and /help): async def f(context:
        CommandExecutionContext, ...) returning CmdCtl.success(...) or
        CmdCtl.failed(...), or yielding CmdCtl.message(...) first. Its
        parameters are read from the command's text by their Arg
        declarations (services.command.parser)."""

        def deco(func):
            self._record_command(name, func, description=description, aliases=aliases or [], permission=permission,
                                 usage=usage, category=category, tags=tags or [], internal=internal, **i18n)
            return func

        return deco

    def mount_command_group(self, name: str, description: str, permission: Any = None, category: str = "plugin",
                            tags: Optional[list] = None):
        """A group of commands, /name.sub each (see CommandGroup)."""
        from nekro_agent.services.command.group import CommandGroup

        return CommandGroup(name, description, permission=permission, category=category, tags=tags, plugin=self)

    def _record_command(self, name: str, func: Callable, **meta: Any) -> None:
        self.commands.append((name, func, meta))

    def mount_router(self):
        """Mount a web router: def f() -> fastapi.APIRouter. Its routes are
        served at /plugins/{key}/... (the reference's prefix) by the
        plugin's own process, while the plugin is enabled (nekro_agent._web)."""

        def deco(func):
            self.router_factory = func
            self._router = None
            return func

        return deco

    def get_plugin_router(self):
        """The APIRouter the mount_router function returns (made once), or
        None when the plugin mounts none or the function fails (logged)."""
        if self._router is not None or self.router_factory is None:
            return self._router
        try:
            self._router = self.router_factory()
        except Exception:  # noqa: BLE001 - the reference serves the plugin without routes
            self.logger.exception("plugin %s: its router function failed; no web routes", self.key)
            return None
        return self._router

    def mount_webhook_method(self, endpoint: str, name: str, description: str = ""):
        """A webhook handler: recorded, not served yet."""

        def deco(func):
            self.webhook_methods[endpoint] = func
            return func

        return deco

    def mount_async_task(self, task_type: str):
        """An asynchronous task (yielding TaskCtl), which task.start runs in
        the plugin's process (nekro_agent.services.plugin.task)."""

        def deco(func):
            from nekro_agent.services.plugin.task import TaskRunner

            self.async_tasks[task_type] = func
            TaskRunner().register_task_type(task_type, func)
            return func

        return deco

    def reset_methods(self) -> None:
        self.sandbox_methods = []

    def is_enabled(self) -> bool:
        return True

    @property
    def is_builtin(self) -> bool:
        return self._is_builtin

    @property
    def is_package(self) -> bool:
        return self._is_package

    def get_name(self, lang: Any = None) -> str:
        from nekro_agent.schemas.i18n import SupportedLang, get_text

        return get_text(self.i18n_name, self.name, lang or SupportedLang.ZH_CN)

    def get_description(self, lang: Any = None) -> str:
        from nekro_agent.schemas.i18n import SupportedLang, get_text

        return get_text(self.i18n_description, self.description, lang or SupportedLang.ZH_CN)

    def get_vector_collection_name(self, key: str = "") -> str:
        from nekro_agent import _unavailable

        _unavailable.fail("get_vector_collection_name()", "nekro has no vector database (Qdrant)")

    def not_served(self) -> list:
        """What the plugin declared that nekro does not serve yet."""
        out = []
        if self.webui_path and not str(self.webui_path).startswith("/"):
            out.append("web UI files (webui_path=%r, /__webui__/)" % self.webui_path)
        if self.webhook_methods:
            out.append("webhooks (%s)" % ", ".join(sorted(self.webhook_methods)))
        return out

    # Services.

    @property
    def store(self) -> PluginStore:
        return PluginStore(self)

    def get_plugin_data_dir(self) -> Path:
        """The plugin's own directory, data/plugins/<author>.<module>/."""
        if self._data_dir is None:
            # Asked while the plugin is imported (a module-level
            # `plugin_dir = plugin.get_plugin_path()`, as the documents
            # write it): data/plugins/<key>/, created as the reference
            # does. Files written now are moved into the directory's
            # volume when nekro mounts it.
            if not _plugins_root:
                raise RuntimeError("the plugin's data directory is known once nekro has loaded the plugin")
            d = Path(_plugins_root) / self.key
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
            return d
        return Path(self._data_dir)

    get_plugin_path = get_plugin_data_dir

    def get_config(self, cls=None):
        """The plugin's settings (its mount_config class), as the operator
        set them. The same object every time, updated in place when a
        setting changes."""
        if self.config_class is None:
            if not (isinstance(cls, type) and issubclass(cls, ConfigBase)):
                raise AttributeError("plugin %s mounted no config (mount_config)" % self.key)
            self.mount_config()(cls)  # get_config(Cls) at import time declares it, as in the reference
        if cls is not None and not (isinstance(cls, type) and issubclass(self.config_class, cls)):
            raise TypeError("get_config(%s): the plugin's config class is %s" % (getattr(cls, "__name__", cls), self.config_class.__name__))
        h = self._config_holder
        if h.obj is None:  # outside nekro's host (an import for a test): the defaults
            h.update({}, -1)
        return h.obj

    @property
    def config(self):
        return self.get_config()

    async def save_config(self, cfg) -> None:
        """Store changed settings (checked by nekro; a bad value raises)."""
        values = _config.describe_values(cfg)
        answer = await _link.get().request("config.set", values=values)
        self._config_holder.update(answer["values"], answer["version"])


# data/plugins, given by nekro when it starts the plugin's process.
_plugins_root = ""
# The plugin this process serves (the last NekroPlugin made).
_current_plugin: Optional["NekroPlugin"] = None


class _Packages:
    """Where this plugin's own packages live, and where they come from: a
    virtual environment of the plugin's own (nekro_agent._deps) over the
    system's packages, made on the first install when the plugin declared
    no requirements."""

    def __init__(self):
        self.env_dir = ""
        self.index = ""

    def configure(self, env_dir: str, index: str) -> None:
        self.env_dir, self.index = env_dir, index
        self._use_env()

    def _use_env(self) -> None:
        """Put the environment's packages first on sys.path (a process
        started by the environment's own python has them there already)."""
        import sys

        from nekro_agent import _deps

        site = _deps.site_packages(self.env_dir) if self.env_dir else ""
        if site and os.path.isdir(site) and site not in sys.path:
            sys.path.insert(0, site)

    def satisfied(self, spec: str) -> bool:
        """Whether an installed distribution (the environment's first, then
        the system's) meets spec, version included."""
        try:
            from importlib import metadata

            from pip._vendor.packaging.requirements import Requirement

            req = Requirement(spec)
            return req.specifier.contains(metadata.version(req.name), prereleases=True)
        except Exception:  # noqa: BLE001 - unknown: the import decides
            return True

    def install(self, spec: str) -> None:
        import subprocess
        import sys

        from nekro_agent import _deps

        if not self.env_dir:
            raise ImportError("package %r is not installed, and this plugin has no environment to install it into" % spec)
        try:
            if not os.path.exists(_deps.venv_python(self.env_dir)):
                _deps.make_venv(self.env_dir, getattr(sys, "_base_executable", None) or sys.executable)
            _deps.pip_install(self.env_dir, self.index, [spec])
        except _deps.RequirementError as e:
            hint = "" if self.index else (": the operator sets a package index with --python-index URL "
                                          "(or a directory of wheels)")
            raise ImportError("plugin %s: %s%s" % (_plugin_name(), e, hint)) from None
        except subprocess.CalledProcessError as e:
            raise ImportError("plugin %s: making its environment failed: %s" % (_plugin_name(), (e.stderr or e).strip()[-1000:])) from None
        self._use_env()
        importlib.invalidate_caches()


def _plugin_name() -> str:
    p = _current_plugin
    return p.key if p is not None else os.path.basename(os.getcwd())


_packages = _Packages()


def dynamic_import_pkg(package_spec: str, import_name: Optional[str] = None, **_: Any):
    """Import a package the plugin needs, e.g. dynamic_import_pkg("requests>=2.25").

    An installed package that meets the version asked (this plugin's own,
    or the system's) is imported. A missing one, or one of another version,
    is installed into this plugin's own environment (never the system's,
    never another plugin's) from the operator's package index (nekro
    --python-index), then imported; without an index that is an
    ImportError naming the flag. Installs are kept for later starts.
    """
    name = import_name or re.split(r"[<>=!~\[; ]", package_spec.strip(), maxsplit=1)[0].replace("-", "_")
    if _packages.satisfied(package_spec):
        try:
            return importlib.import_module(name)
        except ImportError:
            pass
    _packages.install(package_spec)
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[mod]  # another version was imported: this plugin's own replaces it
    return importlib.import_module(name)


_ = _core_logger  # core.logger exists before any plugin logs

# The reference's api.plugin also offers the command system and tasks.
from nekro_agent.services.command.base import CommandPermission  # noqa: E402
from nekro_agent.services.command.ctl import CmdCtl  # noqa: E402
from nekro_agent.services.command.group import CommandGroup  # noqa: E402
from nekro_agent.services.command.schemas import Arg, CommandExecutionContext, CommandResponse  # noqa: E402
from nekro_agent.services.plugin.schema import SandboxMethod  # noqa: E402
from nekro_agent.services.plugin.task import AsyncTaskHandle, TaskCtl, TaskRunner, TaskSignal, task  # noqa: E402
