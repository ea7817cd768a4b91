"""How a command's text becomes its function's arguments, as the
reference's command system reads it (nekro_agent.services.command.parser).

A command function takes the execution context first, then its
parameters. Each parameter may carry an Arg, as its default value
(`n: int = Arg("how many", positional=True)`) or in its annotation
(`n: Annotated[int, Arg(...)] = 1`). The text after the command's name is
split into words (shell quoting) and read so:

- `name:value` (or `name:"a value"`) sets the parameter `name`; a word
  whose part before the colon is no parameter's name is a plain word;
- plain words go, in order, to the parameters declared positional=True;
- a greedy=True parameter takes the rest of the text from the first
  plain word on;
- a command with a single positional or greedy parameter gets the whole
  text in it, spaces and all;
- a parameter given no value gets its default; one without a default is
  an error naming it.

Values are converted by the annotation: bool (true, 1, yes, on), int and
float (with Arg.range checked); anything else stays a str, and an
Arg.choices list is checked. (An Optional[int] annotation is not int: its
value stays a str, as in the reference.)
"""
from __future__ import annotations

import inspect
import shlex
from typing import Any, Callable, Dict, List, Optional, Tuple, get_type_hints

from nekro_agent.schemas.i18n import t
from nekro_agent.services.command.schemas import _UNSET, Arg

__all__ = ["ArgumentParser"]


class _Param:
    """One parameter of a command function, as the parser reads it."""

    __slots__ = ("name", "kind", "arg", "default")

    def __init__(self, name: str, kind: Any, arg: Optional[Arg], default: Any):
        self.name, self.kind, self.arg, self.default = name, kind, arg, default

    @property
    def positional(self) -> bool:
        return bool(self.arg and self.arg.positional)

    @property
    def greedy(self) -> bool:
        return bool(self.arg and self.arg.greedy)

    @property
    def required(self) -> bool:
        return self.default is _UNSET

    def missing(self) -> ValueError:
        why = " (%s)" % self.arg.description if self.arg and self.arg.description else ""
        return ValueError(t(zh_CN="缺少必填参数: ", en_US="Missing required argument: ") + self.name + why)


class ArgumentParser:
    """Parses a command's text for its function (see the module)."""

    @classmethod
    def params(cls, func: Callable) -> List[_Param]:
        """The function's parameters after the execution context (the
        first), leaving out self and **kwargs."""
        try:
            hints = get_type_hints(func, include_extras=True)
        except Exception:  # noqa: BLE001 - unresolvable hints read as str, as in the reference
            hints = {}
        out: List[_Param] = []
        sig = inspect.signature(func)
        for i, (name, p) in enumerate(sig.parameters.items()):
            if name in ("self", "context") or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            if i == 0 or (i == 1 and "self" in sig.parameters):
                continue  # the execution context, whatever its name
            kind, arg = hints.get(name, str), None
            for meta in getattr(kind, "__metadata__", ()):  # Annotated[T, Arg(...)]
                if isinstance(meta, Arg):
                    arg = meta
                    break
            if hasattr(kind, "__metadata__"):
                kind = kind.__origin__
            default = _UNSET
            if p.default is not p.empty:
                if isinstance(p.default, Arg):
                    arg, default = p.default, p.default.default
                else:
                    default = p.default
            out.append(_Param(name, kind, arg, default))
        return out

    @classmethod
    def parse(cls, func: Callable, raw_args: str, **_: Any) -> Dict[str, Any]:
        """The keyword arguments func gets for raw_args; ValueError says
        what is wrong with them."""
        params = cls.params(func)
        if not params:
            return {}
        text = (raw_args or "").strip()
        if not text:
            out = {}
            for p in params:
                if p.required:
                    raise p.missing()
                out[p.name] = p.default
            return out
        if len(params) == 1 and (params[0].greedy or params[0].positional):
            return {params[0].name: cls.convert(text, params[0])}
        try:
            words = shlex.split(text)
        except ValueError:  # an unclosed quote: plain spaces
            words = text.split()
        by_name = {p.name: p for p in params}
        greedy = next((p for p in params if p.greedy), None)
        named: Dict[str, str] = {}
        plain: List[str] = []
        for i, w in enumerate(words):
            kv = cls.key_value(w)
            if kv is not None and kv[0] in by_name:
                named[kv[0]] = kv[1]
                continue
            if kv is None and greedy is not None and greedy.name not in named:
                named[greedy.name] = " ".join(words[i:])
                break
            plain.append(w)
        out: Dict[str, Any] = {}
        for name, v in named.items():
            out[name] = cls.convert(v, by_name[name])
        for p, v in zip([p for p in params if p.positional and p.name not in out], plain):
            out[p.name] = cls.convert(v, p)
        for p in params:
            if p.name not in out:
                if p.required:
                    raise p.missing()
                out[p.name] = p.default
        return out

    @staticmethod
    def key_value(word: str) -> Optional[Tuple[str, str]]:
        """(name, value) of a `name:value` word; None for any other."""
        name, sep, value = word.partition(":")
        if not sep or not name.isidentifier():
            return None
        if len(value) >= 2 and value[0] in "\"'" and value[-1] == value[0]:
            value = value[1:-1]
        return name, value

    @staticmethod
    def convert(value: str, p: _Param) -> Any:
        """value as p's type, its Arg's range and choices checked."""
        if p.kind is bool:
            return value.lower() in ("true", "1", "yes", "on")
        if p.kind in (int, float):
            try:
                n = p.kind(value)
            except ValueError:
                if p.kind is int:
                    raise ValueError(t(zh_CN="参数 %s 需要整数类型" % p.name,
                                       en_US="Argument %s requires integer type" % p.name)) from None
                raise ValueError(t(zh_CN="参数 %s 需要数值类型" % p.name,
                                   en_US="Argument %s requires numeric type" % p.name)) from None
            if p.arg and p.arg.range:
                lo, hi = p.arg.range
                if not lo <= n <= hi:
                    raise ValueError(t(zh_CN="参数 %s 的值需在 %s-%s 之间" % (p.name, lo, hi),
                                       en_US="Argument %s must be between %s and %s" % (p.name, lo, hi)))
            return n
        if p.arg and p.arg.choices and value not in p.arg.choices:
            raise ValueError(t(zh_CN="参数 %s 的值必须是 %s 之一" % (p.name, p.arg.choices),
                               en_US="Argument %s must be one of %s" % (p.name, p.arg.choices)))
        return value

    @classmethod
    def usage(cls, func: Callable, name: str) -> str:
        """'/name <a> [b] [key:<key>]' from the parameters: positional and
        greedy ones as words, the others as name:value; optional ones in
        brackets."""
        parts = ["/" + name]
        for p in cls.params(func):
            word = p.name if p.positional or p.greedy else "%s:<%s>" % (p.name, p.name)
            if p.positional or p.greedy:
                word = "[%s]" % word if not p.required else "<%s>" % word
            elif not p.required:
                word = "[%s]" % word
            parts.append(word)
        return " ".join(parts)
