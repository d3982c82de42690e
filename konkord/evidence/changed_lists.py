"""Lists that also remember something derived from their items (columns, row indices) and
let go of it as soon as they are changed, so a stale summary is never read for new items;
and lists whose items are made only when first read (`MadeWhenRead`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

# Every list method that changes the list in place.
CHANGING_METHODS = (
    "append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse",
    "__setitem__", "__delitem__", "__iadd__", "__imul__",
)  # fmt: skip


def forget_when_changed(cls: type[list[Any]], attribute: str) -> None:
    """Make every changing method of the list subclass `cls` set `attribute` to None first."""
    for name in CHANGING_METHODS:
        setattr(cls, name, _forgetting(name, attribute))


def _forgetting(name: str, attribute: str) -> Any:
    method = getattr(list, name)

    def changed(self: list[Any], *args: Any, **kwargs: Any) -> Any:
        if isinstance(self, MadeWhenRead):  # its items made before they change
            self.made()
        setattr(self, attribute, None)
        return method(self, *args, **kwargs)

    changed.__name__ = name
    return changed


class MadeWhenRead(list[Any]):
    """A list whose items are made only when first read: a report at 20 models x 1,000 tasks
    holds 380,000 verdict rows and 190,000 combined verdicts, and reads its figures from
    their columns (`combined_columns`); making each one as an object took about half a second
    that nothing read. Until then the list knows only how many items it will hold.

    Every way of reading or changing it makes the items first (once, under a lock: a report
    makes its task files on a thread beside its figures); list functions of C that look at a
    list's storage directly (`list.__getitem__(x, 0)`, `str.join`) are not used on these."""

    def __init__(self, size: int, make: Callable[[], Iterable[Any]]) -> None:
        super().__init__()
        self._pending: tuple[int, Callable[[], Iterable[Any]]] | None = (size, make)
        self._making = threading.Lock()

    def made(self) -> MadeWhenRead:
        """The list, its items made (now, if they were not yet)."""
        if self.__dict__.get("_pending") is not None:  # (none yet where unpickled)
            with self._making:
                pending = self._pending
                if pending is not None:
                    list.extend(self, pending[1]())
                    self._pending = None
        return self

    def __len__(self) -> int:
        pending = self.__dict__.get("_pending")
        return pending[0] if pending is not None else list.__len__(self)

    def __getstate__(self) -> dict[str, Any]:  # (pickled and copied as the items it holds)
        self.made()
        return {k: v for k, v in self.__dict__.items() if k not in ("_pending", "_making")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pending = None
        self._making = threading.Lock()


def _making_first(name: str) -> Any:
    method = getattr(list, name)

    def made_first(self: MadeWhenRead, *args: Any, **kwargs: Any) -> Any:
        return method(self.made(), *args, **kwargs)

    made_first.__name__ = name
    return made_first


# Every list method that reads the items (changing ones are `CHANGING_METHODS`).
READING_METHODS = (
    "__iter__", "__getitem__", "__contains__", "__reversed__", "__eq__", "__ne__", "__lt__",
    "__le__", "__gt__", "__ge__", "__add__", "__mul__", "__rmul__", "__repr__", "copy",
    "count", "index",
)  # fmt: skip
for _name in (*READING_METHODS, *CHANGING_METHODS):
    setattr(MadeWhenRead, _name, _making_first(_name))
MadeWhenRead.__radd__ = lambda self, other: list(other) + list(self.made())  # type: ignore[attr-defined]
MadeWhenRead.__hash__ = None  # type: ignore[assignment]
