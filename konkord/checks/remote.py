"""A handle on an object that lives on the other side of the wire (wire.py): every use of a
`Remote` (a call, an attribute, len, iteration, indexing...) is a request to the side it lives
on, and its `==` and hash are identity, so the other side's idea of equality never counts.

Copied into the sandbox beside wire.py and plain.py, and imported by both sides; like them it
uses the standard library only, and imports nothing of its own at run time.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: importing typing costs every check a few milliseconds
if TYPE_CHECKING:
    from typing import Any


class Remote:
    """An object that lives on the other side; every use is a request to it."""

    __slots__ = ("__weakref__", "_channel", "_ref")

    def __init__(self, channel: Any, ref: int) -> None:
        object.__setattr__(self, "_channel", channel)
        object.__setattr__(self, "_ref", ref)

    def _op(self, name: str, *args: Any) -> Any:
        channel: Any = object.__getattribute__(self, "_channel")
        return channel.request({"op": name, "ref": object.__getattribute__(self, "_ref")}, args)

    def __getattr__(self, name: str) -> Any:
        return self._op("getattr", name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._op("setattr", name, value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        channel: Any = object.__getattribute__(self, "_channel")
        return channel.call(object.__getattribute__(self, "_ref"), args, kwargs)

    def __len__(self) -> int:
        return self._op("len")  # type: ignore[no-any-return]

    def __iter__(self) -> Any:
        return self._op("iter")

    def __next__(self) -> Any:
        return self._op("next")

    def __getitem__(self, key: Any) -> Any:
        return self._op("getitem", key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._op("setitem", key, value)

    def __delitem__(self, key: Any) -> None:
        self._op("delitem", key)

    def __contains__(self, item: Any) -> bool:
        return self._op("contains", item)  # type: ignore[no-any-return]

    def __bool__(self) -> bool:
        return self._op("bool")  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return self._op("repr")  # type: ignore[no-any-return]

    def __str__(self) -> str:
        return self._op("str")  # type: ignore[no-any-return]

    # Equality and hashing are identity: the other side's idea of equality never counts.
    __eq__ = object.__eq__
    __hash__ = object.__hash__


def channel_and_ref(handle: Remote) -> tuple[Any, int]:
    """The channel a handle belongs to and its number on the other side."""
    return object.__getattribute__(handle, "_channel"), object.__getattribute__(handle, "_ref")
