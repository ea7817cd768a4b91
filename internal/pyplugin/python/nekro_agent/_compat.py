"""Lets plugins written for pydantic v2 (as the documents are) run where
the host has pydantic v1 (Debian bookworm's python3-pydantic is 1.10).

With v1 installed, BaseModel gains the v2 names the documents use, each
mapped to its v1 equivalent: model_validate_json (parse_raw),
model_validate (parse_obj), model_dump_json (json), model_dump (dict),
model_copy (copy) and model_fields (__fields__); pydantic.field_validator
is v1's validator (mode="before" as pre=True). With v2 nothing changes.
Applied before a plugin is imported.
"""
from __future__ import annotations


def apply() -> None:
    try:
        import pydantic
    except ImportError:
        return
    if not str(getattr(pydantic, "VERSION", "2")).startswith("1."):
        return
    if not hasattr(pydantic, "field_validator"):
        pydantic.field_validator = _field_validator
    base = pydantic.BaseModel
    if hasattr(base, "model_validate_json"):
        return
    base.model_validate_json = classmethod(lambda cls, data, **_: cls.parse_raw(data))
    base.model_validate = classmethod(lambda cls, obj, **_: cls.parse_obj(obj))
    base.model_dump_json = lambda self, **kw: self.json(**_v1_args(kw))
    base.model_dump = lambda self, **kw: self.dict(**_v1_args(kw))
    base.model_copy = lambda self, **kw: self.copy(**kw)
    base.model_fields = property(lambda self: self.__fields__)


def _field_validator(*fields: str, mode: str = "after", check_fields=None, **_):
    """v2's field_validator as v1's validator: the function (a classmethod,
    as v2 wants it, or a plain function) gets the value and returns it."""
    import pydantic

    kw = {"pre": mode == "before", "allow_reuse": True}
    if check_fields is not None:
        kw["check_fields"] = check_fields
    return pydantic.validator(*fields, **kw)


def _v1_args(kw: dict) -> dict:
    """v2 keyword names that v1 spells the same way pass through; the rest
    (mode=, round_trip=, ...) have no v1 meaning and are dropped."""
    keep = ("include", "exclude", "by_alias", "exclude_unset", "exclude_defaults", "exclude_none", "indent")
    return {k: v for k, v in kw.items() if k in keep}
