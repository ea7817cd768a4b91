"""Plugin settings: ConfigBase and ExtraField as the reference's plugins
declare them, described to nekro, which keeps them in
data/plugins/<key>/config.yaml and checks every change.

    @plugin.mount_config()
    class WeatherConfig(ConfigBase):
        API_KEY: str = Field(default="", title="API key",
                             json_schema_extra=ExtraField(is_secret=True).model_dump())
        TIMEOUT: int = Field(default=10, title="Timeout", ge=1, le=60)

    config = plugin.get_config(WeatherConfig)   # config.TIMEOUT

The object get_config returns is updated in place when the operator
changes a setting (nekro sends the settings' version with each call), so
a plugin that keeps it from import time sees the change, as in the
reference. ConfigBase is a pydantic model when pydantic is installed
(v1 or v2), a plain class with class-attribute defaults otherwise.
"""
from __future__ import annotations

import typing
from typing import Any

try:
    import pydantic as _pydantic
except ImportError:  # pragma: no cover - nekro's setup installs pydantic
    _pydantic = None

_V1 = _pydantic is not None and str(getattr(_pydantic, "VERSION", "2")).startswith("1.")

if _pydantic is not None:

    class ConfigBase(_pydantic.BaseModel):
        """Base of a plugin's settings class (mount_config)."""

        if _V1:

            class Config:
                extra = "ignore"
                validate_assignment = False
        else:
            model_config = {"extra": "ignore"}

    class ExtraField(_pydantic.BaseModel):
        """How a setting is shown and treated (Field(json_schema_extra=
        ExtraField(...).model_dump())). nekro uses is_secret, is_hidden,
        is_textarea and required; the rest is accepted and kept."""

        is_hidden: bool = False
        is_secret: bool = False
        placeholder: str = ""
        is_textarea: bool = False
        required: bool = False
        overridable: bool = False
        sub_item_name: str = ""
        ref_model_groups: bool = False
        model_type: str = ""
        load_to_sysenv: bool = False
        load_sysenv_as: str = ""
        load_to_nonebot_env: bool = False
        load_nbenv_as: str = ""

        if _V1:

            class Config:
                extra = "allow"
        else:
            model_config = {"extra": "allow"}

else:

    class ConfigBase:  # type: ignore[no-redef]
        """Base of a plugin's settings class (mount_config): class
        attributes with their defaults."""

        def __init__(self, **values: Any):
            for k, v in type(self).__dict__.items():
                if not k.startswith("_") and not callable(v):
                    setattr(self, k, v)
            for k, v in values.items():
                setattr(self, k, v)

    class ExtraField:  # type: ignore[no-redef]
        def __init__(self, **meta: Any):
            self.meta = meta

        def model_dump(self) -> dict:
            return dict(self.meta)


_KINDS = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", tuple: "array",
          set: "array", dict: "object"}


def _kind(ann) -> tuple:
    """(kind, nullable, choices) of a field's annotation."""
    nullable, choices = False, None
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Union:
        inner = [a for a in args if a is not type(None)]
        nullable = len(inner) < len(args)
        if len(inner) != 1:
            return "", nullable, None
        ann = inner[0]
        origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Literal:
        choices = list(args)
        kinds = {_KINDS.get(type(a), "") for a in args}
        return (kinds.pop() if len(kinds) == 1 else ""), nullable, choices
    base = origin or ann
    if isinstance(base, type):
        if issubclass(base, bool):
            return "boolean", nullable, None
        for t, k in _KINDS.items():
            if issubclass(base, t):
                return k, nullable, None
        if _pydantic is not None and issubclass(base, _pydantic.BaseModel):
            return "object", nullable, None
    return "", nullable, None


def _plain(v):
    """A default as JSON (pydantic models and tuples included)."""
    if hasattr(v, "model_dump"):
        return v.model_dump()
    if isinstance(v, (tuple, set, frozenset)):
        return [_plain(x) for x in v]
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return v


def describe(cls) -> list:
    """The settings of cls as nekro's fields (pluginconfig.Field)."""
    out = []
    if _pydantic is None or not issubclass(cls, _pydantic.BaseModel):
        for name, v in cls.__dict__.items():
            if name.startswith("_") or callable(v):
                continue
            kind = _KINDS.get(type(v), "")
            out.append({"name": name, "kind": kind, "default": _plain(v), "nullable": v is None})
        return out
    if _V1:
        for name, mf in cls.__fields__.items():
            fi = mf.field_info
            extra = dict(fi.extra.get("json_schema_extra") or {})
            kind, nullable, choices = _kind(mf.outer_type_ if not mf.allow_none else typing.Optional[mf.outer_type_])
            d = {"name": name, "kind": kind, "title": fi.title or "", "description": fi.description or "",
                 "default": _plain(mf.default), "nullable": nullable or mf.allow_none}
            _extra(d, extra, choices, getattr(fi, "ge", None), getattr(fi, "le", None))
            out.append(d)
        return out
    for name, fi in cls.model_fields.items():
        extra = fi.json_schema_extra if isinstance(fi.json_schema_extra, dict) else {}
        kind, nullable, choices = _kind(fi.annotation)
        ge = le = None
        for m in fi.metadata:
            ge = getattr(m, "ge", ge)
            le = getattr(m, "le", le)
        default = None if fi.is_required() else fi.get_default(call_default_factory=True)
        d = {"name": name, "kind": kind, "title": fi.title or "", "description": fi.description or "",
             "default": _plain(default), "nullable": nullable}
        _extra(d, dict(extra), choices, ge, le)
        out.append(d)
    return out


def _extra(d: dict, extra: dict, choices, ge, le) -> None:
    d["secret"] = bool(extra.get("is_secret"))
    d["hidden"] = bool(extra.get("is_hidden"))
    d["multiline"] = bool(extra.get("is_textarea"))
    d["required"] = bool(extra.get("required"))
    if choices:
        d["choices"] = choices
    if ge is not None:
        d["min"] = ge
    if le is not None:
        d["max"] = le


class Holder:
    """The settings object a plugin holds, kept current."""

    def __init__(self, cls):
        self.cls = cls
        self.obj = None
        self.version = -1

    def update(self, values: dict, version: int) -> None:
        new = self.cls(**values)
        if self.obj is None:
            self.obj = new
        else:  # in place: a plugin that kept the object sees the change
            for k in values:
                object.__setattr__(self.obj, k, getattr(new, k))
        self.version = version


def describe_values(cfg) -> dict:
    """A settings object's values as JSON."""
    if hasattr(cfg, "model_dump"):
        return _plain(cfg.model_dump())
    return {k: _plain(v) for k, v in vars(cfg).items() if not k.startswith("_")}
