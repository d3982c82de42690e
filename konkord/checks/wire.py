"""The line between the tests (trusted) and the answer (sandboxed): values cross as plain data.

Both sides import this file: the trusted harness (harness.py) and the sandboxed worker
(worker.py, copied into the sandbox with this file and plain.py). It uses the standard library
only (typing, base64 and traceback are not imported on the way to a pass: each costs start-up).

One JSON object per line, in both directions, strictly nested like a call stack: a side that
sent a request reads until its reply comes, serving any request the other side sends first (a
callback). Values are plain data: None, bool, int, float, str, list, and tagged tuple, dict,
set, frozenset, bytes and slice. Decoding builds only those builtin types, so no object with a
rigged `__eq__` can cross. Any other object stays where it lives and crosses as a handle; the
other side sees a `remote.Remote` whose calls and operations are requests, and whose `==` is identity.
An iterator of the tests (a generator...) crosses as its items, never as a handle: a live
generator would show the answer its frame, and with it the tests' variables.

The trusted side is strict about what it accepts (message size, nesting, known handles, no
private attributes of its objects); anything wrong with a message ends the check as a failure.
"""

from __future__ import annotations

import builtins
import importlib
import operator
import sys

TYPE_CHECKING = False  # not typing's: importing typing costs every check a few milliseconds
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, BinaryIO

    from konkord.checks import plain, remote
else:
    import plain
    import remote

MAX_MESSAGE = 32 * 1024 * 1024  # bytes of one JSON line
MAX_DEPTH = 200  # nesting of one value
MAX_NESTING = 64  # callbacks inside calls inside callbacks...
MAX_ITEMS = 1_000_000  # items of one iterator the tests pass, materialised to cross


def _live_types() -> tuple[type, ...]:
    try:
        raise ValueError
    except ValueError as exc:
        traceback = exc.__traceback__
    return (type(sys._getframe()), type(_live_types.__code__), type(traceback), type(sys))


# What the tests' objects never show the answer, whatever the attribute's name: a frame (its
# f_globals hold the tests' expected values), code (its constants), a traceback, a module.
LIVE_TYPES = _live_types()
OPERATIONS: dict[str, Callable[..., Any]] = {
    "len": len,
    "iter": iter,
    "next": next,
    "getitem": operator.getitem,
    "setitem": operator.setitem,
    "delitem": operator.delitem,
    "contains": operator.contains,
    "bool": bool,
    "repr": repr,
    "str": str,
}


ProtocolError = plain.ProtocolError


class Closed(ProtocolError):
    """The other side closed its end (it exited or was killed)."""


class Broken(BaseException):
    """Raised into the tests when the answer's side broke the check (a BaseException, so a
    test's `except Exception` cannot swallow it; the harness records the failure anyway)."""


class Channel:
    """One end of the line. `trusted` is the tests' end, which accepts less than it gives."""

    def __init__(self, reader: BinaryIO, writer: BinaryIO, trusted: bool) -> None:
        self.reader = reader
        self.writer = writer
        self.trusted = trusted
        self.exports: dict[int, Any] = {}
        self.export_ids: dict[int, int] = {}
        self.imports: dict[int, remote.Remote] = {}
        self.nesting = 0
        self.broken: str | None = None  # why the other side broke the check, once it did
        self.closed = False  # the other side's end closed (its process ended)

    # -- values ------------------------------------------------------------------------------
    def encode(self, value: Any, args: list[Any] | None = None, depth: int = 0) -> Any:
        """Plain data for `value`; other objects become handles. The worker turns subclasses
        of builtin types into the builtin (an int subclass crosses as its int value)."""
        if depth > MAX_DEPTH:
            raise ValueError("a value nested too deeply to cross")
        if args is not None:
            for i, arg in enumerate(args):
                if value is arg and type(arg) in (list, dict, set):
                    return {"arg": i}
        kind = type(value)
        if kind in plain.SCALARS:
            return value
        if not self.trusted:
            value, kind = self._base_value(value, kind)
        if kind in plain.SCALARS:
            return value
        down = depth + 1
        if kind is list:
            return [self.encode(v, args, down) for v in value]
        if kind is tuple:
            return {"tuple": [self.encode(v, args, down) for v in value]}
        if kind is dict:
            return {"dict": [[self.encode(k, args, down), self.encode(v, args, down)]
                             for k, v in value.items()]}
        if kind is set or kind is frozenset:
            return {kind.__name__: [self.encode(v, args, down) for v in value]}
        if kind is bytes:
            return {"bytes": value.hex()}
        if kind is slice:
            return {"slice": [self.encode(v, args, down)
                              for v in (value.start, value.stop, value.step)]}
        if isinstance(value, remote.Remote):
            owner, back = remote.channel_and_ref(value)
            if owner is self:
                return {"back": back}
        if self.trusted and hasattr(kind, "__next__"):
            return {"iter": [self.encode(v, args, down) for v in self._materialise(value)]}
        named = plain.by_name(value)
        if named is not None:
            return {"stdlib": named}
        ref = self.export_ids.get(id(value))
        if ref is None or self.exports.get(ref) is not value:
            ref = len(self.exports) + 1
            self.exports[ref] = value
            self.export_ids[id(value)] = ref
        return {"ref": ref}

    @staticmethod
    def _base_value(value: Any, kind: type) -> tuple[Any, type]:
        """The builtin value inside an instance of a builtin type's subclass (worker side)."""
        for base, convert in plain.BASE_VALUES:
            if isinstance(value, base) and kind is not base:
                converted = convert(value)
                return converted, type(converted)
        return value, kind

    @staticmethod
    def _materialise(iterator: Any) -> list[Any]:
        """The items of an iterator (a generator...) of the tests: it crosses as data, since a
        live generator would show the answer its frame, and with it the tests' variables."""
        items: list[Any] = []
        for item in iterator:
            if len(items) == MAX_ITEMS:
                raise ValueError(f"an iterator of more than {MAX_ITEMS} items cannot cross "
                                 "to the answer (pass a list)")
            items.append(item)
        return items

    def decode(self, data: Any, depth: int = 0) -> Any:
        """The value `data` stands for: builtin types, own objects back, or Remote handles."""
        if depth > MAX_DEPTH:
            raise ProtocolError("a value nested too deeply")
        kind = type(data)
        if kind in plain.SCALARS:
            return data
        down = depth + 1
        if kind is list:
            return [self.decode(v, down) for v in data]
        if kind is not dict or len(data) != 1:
            raise ProtocolError(f"not a value: {str(data)[:80]}")
        ((tag, inner),) = data.items()
        if tag == "tuple" and type(inner) is list:
            return tuple(self.decode(v, down) for v in inner)
        if tag == "dict" and type(inner) is list:
            pairs = [self.decode(p, down) for p in inner]
            if not all(type(p) is list and len(p) == 2 for p in pairs):
                raise ProtocolError("a dict entry is not a (key, value) pair")
            return {k: v for k, v in pairs}
        if tag in ("set", "frozenset") and type(inner) is list:
            items = (self.decode(v, down) for v in inner)
            return set(items) if tag == "set" else frozenset(items)
        if tag == "bytes" and type(inner) is str:
            return bytes.fromhex(inner)
        if tag == "iter" and type(inner) is list and not self.trusted:
            return iter([self.decode(v, down) for v in inner])
        if tag == "slice" and type(inner) is list and len(inner) == 3:
            return slice(*(self.decode(v, down) for v in inner))
        if tag == "back" and type(inner) is int and inner in self.exports:
            return self.exports[inner]
        if tag == "ref" and type(inner) is int:
            if inner not in self.imports:
                self.imports[inner] = remote.Remote(self, inner)
            return self.imports[inner]
        if tag == "stdlib" and type(inner) is list and len(inner) == 2:
            module, name = inner
            if module in plain.STDLIB_BY_NAME and isinstance(name, str) and name.isidentifier() \
                    and not name.startswith("_"):
                found = getattr(importlib.import_module(module), name, None)
                if isinstance(found, type) or type(found).__module__ == "typing":
                    return found
        raise ProtocolError(f"not a value: {str(data)[:80]}")

    # -- messages ----------------------------------------------------------------------------
    def send(self, message: dict[str, Any]) -> None:
        line = plain.dumps(message).encode() + b"\n"
        self.writer.write(line)
        self.writer.flush()

    def receive(self) -> dict[str, Any]:
        line = self.reader.readline(MAX_MESSAGE + 1)
        if not line:
            raise Closed("the answer's process ended during the tests")
        if len(line) > MAX_MESSAGE or not line.endswith(b"\n"):
            raise ProtocolError(f"a message longer than {MAX_MESSAGE} bytes")
        try:
            message = plain.loads(line[:-1].decode("utf-8"))
        except (ValueError, RecursionError) as exc:
            raise ProtocolError(f"a message that is not JSON ({type(exc).__name__})") from None
        if type(message) is not dict or type(message.get("op")) is not str:
            raise ProtocolError("a message without an op")
        return message

    def call(self, ref: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Call the other side's object `ref`; lists, dicts and sets passed in come back with
        whatever the call did to them, and a returned argument is the argument itself."""
        passed = [*args, *kwargs.values()]
        message = {"op": "call", "ref": ref, "args": [self.encode(a) for a in args],
                   "kwargs": {k: self.encode(v) for k, v in kwargs.items()}}
        return self._exchange(message, passed)

    def request(self, message: dict[str, Any], args: tuple[Any, ...]) -> Any:
        """Ask the other side for an operation on one of its objects."""
        message["args"] = [self.encode(a) for a in args]
        return self._exchange(message, [])

    def _exchange(self, message: dict[str, Any], passed: list[Any]) -> Any:
        if self.broken is not None:
            raise Broken(self.broken)
        if self.nesting >= MAX_NESTING:
            self._break("calls nested too deeply between the tests and the answer")
        self.nesting += 1
        try:
            self.send(message)
            while True:
                reply = self.receive()
                if reply["op"] == "return":
                    return self._returned(reply, passed)
                if reply["op"] == "raise":
                    error = self._raised(reply)
                    break
                self.serve(reply)
        except (ProtocolError, OSError, ValueError, TypeError, RecursionError) as exc:
            if not self.trusted:
                raise
            self.closed = self.closed or isinstance(exc, Closed)
            self._break(str(exc) if isinstance(exc, Closed) else
                        f"the answer's side broke the protocol: {type(exc).__name__}: {exc}")
        finally:
            self.nesting -= 1
        raise error

    def _break(self, reason: str) -> None:
        self.broken = self.broken or reason[:300]
        raise Broken(self.broken)

    def _returned(self, reply: dict[str, Any], passed: list[Any]) -> Any:
        after = reply.get("after") or {}
        if type(after) is not dict:
            raise ProtocolError("bad argument states")
        for key, state in after.items():
            index = int(key)
            if not 0 <= index < len(passed):
                raise ProtocolError("an argument state for no argument")
            plain.sync(passed[index], self.decode(state))
        value = reply.get("value")
        if type(value) is dict and set(value) == {"arg"}:
            index = value["arg"]
            if type(index) is not int or not 0 <= index < len(passed):
                raise ProtocolError("a returned argument that was not passed")
            return passed[index]
        return self.decode(value)

    def _raised(self, reply: dict[str, Any]) -> BaseException:
        """The exception the other side raised, as the nearest builtin Exception class."""
        names = reply.get("types")
        message = str(reply.get("message", ""))[:2000]
        if type(names) is not list:
            raise ProtocolError("bad exception")
        if reply.get("exit") and self.trusted:
            self._break(f"the answer's code raised {str(names[0])[:40]}({message[:100]}) "
                        "during the tests")
        for name in names:
            found = getattr(builtins, str(name), None)
            if isinstance(found, type) and issubclass(found, Exception):
                try:
                    exc = found(message)
                except TypeError:
                    continue
                exc.konkord_remote = True  # type: ignore[attr-defined]
                return exc
        exc = Exception(message)
        exc.konkord_remote = True  # type: ignore[attr-defined]
        return exc

    # -- serving -----------------------------------------------------------------------------
    def serve(self, message: dict[str, Any]) -> None:
        """Carry out one request from the other side on one of our objects, and reply."""
        op = message["op"]
        ref = message.get("ref")
        if type(ref) is not int or ref not in self.exports:
            raise ProtocolError(f"a request on an unknown object: {str(ref)[:40]}")
        target = self.exports[ref]
        raw_args = message.get("args", [])
        raw_kwargs = message.get("kwargs", {})
        if type(raw_args) is not list or type(raw_kwargs) is not dict:
            raise ProtocolError("bad arguments")
        args = [self.decode(a) for a in raw_args]
        kwargs = {str(k): self.decode(v) for k, v in raw_kwargs.items()}
        try:
            if op == "call":
                result = target(*args, **kwargs)
            elif op in ("getattr", "setattr"):
                name = args[0] if args else None
                # The tests' objects show the answer their public attributes, read-only.
                if not isinstance(name, str) or (
                    self.trusted and (name.startswith("_") or op == "setattr")
                ):
                    raise AttributeError(f"attribute {str(name)[:40]!r} is not shared")
                if op == "setattr":
                    setattr(target, name, args[1])
                result = getattr(target, name) if op == "getattr" else None
                if self.trusted and isinstance(result, LIVE_TYPES):
                    raise AttributeError(f"attribute {name[:40]!r} is not shared")
            elif op in OPERATIONS:
                result = OPERATIONS[op](target, *args)
            else:
                raise ProtocolError(f"unknown op {op[:20]!r}")
        except ProtocolError:
            raise
        except Broken:
            raise
        except BaseException as exc:  # the answer may raise anything, SystemExit included
            self._send_raise(exc)
            return
        self._send_return(result, args + list(kwargs.values()) if op == "call" else [])

    def _send_return(self, result: Any, passed: list[Any]) -> None:
        try:
            after = {str(i): self.encode(a) for i, a in enumerate(passed)
                     if type(a) in (list, dict, set)}
            self.send({"op": "return", "value": self.encode(result, passed), "after": after})
        except (ValueError, TypeError, RecursionError) as exc:
            self._send_raise(TypeError(f"the value cannot cross to the tests: {exc}"))

    def _send_raise(self, exc: BaseException) -> None:
        types = [cls.__name__ for cls in type(exc).__mro__]
        try:
            message = str(exc)[:2000]
        except BaseException:
            message = "(the exception's message could not be read)"
        exit_ = not isinstance(exc, Exception)
        if exit_ and not self.trusted:
            import traceback

            sys.stderr.write("".join(traceback.format_exception(exc))[-4000:])
        self.send({"op": "raise", "types": types, "message": message, "exit": exit_})

    def serve_forever(self) -> None:
        """The worker's loop: answer requests until the tests' side closes the line."""
        while True:
            try:
                message = self.receive()
            except Closed:
                return
            self.serve(message)
