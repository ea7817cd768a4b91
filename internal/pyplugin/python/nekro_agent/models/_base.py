"""Read-only stand-ins for the reference's database models.

The reference's plugins query its database through Tortoise ORM models
(DBChatChannel.get_channel(chat_key=...), DBChatMessage.filter(...)). A
plugin process in nekro has no database connection. Rows nekro can answer
from the call itself (the run's own chat and user) are answered; any other
query fails when it is awaited, with NotAvailableError naming the model
and why: the plugin loads, and only that call fails.
"""
from __future__ import annotations

import datetime
import inspect
from typing import Any, Callable, Dict, List, Optional

from nekro_agent import _unavailable

_EPOCH = datetime.datetime.fromtimestamp(0, datetime.timezone.utc)


class Query:
    """A query: chains like Tortoise's QuerySet, answered when awaited."""

    def __init__(self, model: type, source: Callable[[], List[Any]], filters: Optional[Dict[str, Any]] = None):
        self._model, self._source, self._filters = model, source, dict(filters or {})
        self._limit: Optional[int] = None
        self._offset = 0
        self._order: List[str] = []

    def filter(self, *args: Any, **kw: Any) -> "Query":
        q = Query(self._model, self._source, {**self._filters, **kw})
        q._limit, q._offset, q._order = self._limit, self._offset, list(self._order)
        return q

    def exclude(self, *_a: Any, **_k: Any) -> "Query":
        return self

    def order_by(self, *fields: str) -> "Query":
        self._order = list(fields)
        return self

    def limit(self, n: int) -> "Query":
        self._limit = n
        return self

    def offset(self, n: int) -> "Query":
        self._offset = n
        return self

    def only(self, *_a: Any) -> "Query":
        return self

    def prefetch_related(self, *_a: Any) -> "Query":
        return self

    def select_related(self, *_a: Any) -> "Query":
        return self

    async def _rows(self) -> List[Any]:
        source = self._source()
        if inspect.isawaitable(source):  # rows nekro sends (DBChatMessage)
            source = await source
        rows = [r for r in source if all(_match(r, k, v) for k, v in self._filters.items())]
        for f in reversed(self._order):
            key = f.lstrip("-")
            rows.sort(key=lambda r: getattr(r, key, None) or 0, reverse=f.startswith("-"))
        rows = rows[self._offset:]
        return rows if self._limit is None else rows[:self._limit]

    async def all(self) -> List[Any]:
        return await self._rows()

    async def first(self) -> Optional[Any]:
        rows = await self._rows()
        return rows[0] if rows else None

    async def count(self) -> int:
        return len(await self._rows())

    async def exists(self) -> bool:
        return bool(await self._rows())

    async def values(self, *fields: str) -> List[Dict[str, Any]]:
        return [{f: getattr(r, f, None) for f in fields} for r in await self._rows()]

    async def values_list(self, *fields: str, flat: bool = False) -> List[Any]:
        rows = await self._rows()
        if flat and len(fields) == 1:
            return [getattr(r, fields[0], None) for r in rows]
        return [tuple(getattr(r, f, None) for f in fields) for r in rows]

    async def delete(self) -> int:
        self._model._refuse("delete()")

    async def update(self, **_: Any) -> int:
        self._model._refuse("update()")

    def __await__(self):
        return self.all().__await__()

    def __aiter__(self):
        async def gen():
            for r in await self._rows():
                yield r

        return gen()


def _match(row: Any, key: str, want: Any) -> bool:
    field, _, op = key.partition("__")
    have = getattr(row, field, None)
    if op == "":
        return have == want
    if op == "in":
        return have in want
    if op == "not":
        return have != want
    if op in ("gt", "gte", "lt", "lte"):
        if have is None:
            return False
        return {"gt": have > want, "gte": have >= want, "lt": have < want, "lte": have <= want}[op]
    if op == "contains":
        return want in (have or "")
    if op == "icontains":
        return str(want).lower() in str(have or "").lower()
    if op == "isnull":
        return (have is None) == bool(want)
    return False


class Model:
    """A model whose rows nekro cannot give a plugin: every query fails
    when awaited (NotAvailableError); subclasses answer what they can."""

    _why = "a plugin does not reach nekro's database"

    def __init__(self, **fields: Any):
        for k, v in fields.items():
            setattr(self, k, v)

    @classmethod
    def _refuse(cls, what: str):
        _unavailable.fail("%s.%s" % (cls.__name__, what), cls._why)

    @classmethod
    def _source(cls) -> List[Any]:
        cls._refuse("queries")
        return []

    @classmethod
    def filter(cls, *args: Any, **kw: Any) -> Query:
        return Query(cls, cls._source).filter(*args, **kw)

    @classmethod
    def all(cls) -> Query:
        return Query(cls, cls._source)

    @classmethod
    def exclude(cls, *_a: Any, **_k: Any) -> Query:
        return Query(cls, cls._source)

    @classmethod
    async def get(cls, *args: Any, **kw: Any) -> Any:
        row = await cls.filter(*args, **kw).first()
        if row is None:
            raise LookupError("%s: no row matches %r" % (cls.__name__, kw))
        return row

    @classmethod
    async def get_or_none(cls, *args: Any, **kw: Any) -> Optional[Any]:
        return await cls.filter(*args, **kw).first()

    @classmethod
    async def create(cls, **_: Any) -> Any:
        cls._refuse("create()")

    @classmethod
    async def get_or_create(cls, *_a: Any, **_k: Any) -> Any:
        cls._refuse("get_or_create()")

    @classmethod
    async def update_or_create(cls, *_a: Any, **_k: Any) -> Any:
        cls._refuse("update_or_create()")

    @classmethod
    async def bulk_create(cls, *_a: Any, **_k: Any) -> Any:
        cls._refuse("bulk_create()")

    async def save(self, *_a: Any, **_k: Any) -> None:
        self._refuse("save()")

    async def delete(self, *_a: Any, **_k: Any) -> None:
        self._refuse("delete()")

    def __repr__(self) -> str:
        return "<%s %s>" % (type(self).__name__, {k: v for k, v in vars(self).items() if not k.startswith("_")})


def own_chat_key() -> Optional[str]:
    """The chat of the call this task or thread serves, if any."""
    from nekro_agent import _link

    ctx = _link.current_ctx.get()
    return getattr(ctx, "from_chat_key", None) if ctx is not None else None


EPOCH = _EPOCH
