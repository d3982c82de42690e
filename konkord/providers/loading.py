"""Importing litellm once, quietly, and reading its errors.

The lowest module of the providers: llm.py (the door), deployments, budget and the batch modules
all need litellm loaded the same way, and the same reading of its errors, without importing each
other for it.
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Any

from konkord.configuration.credentials import load_dotenv_file, redact
from konkord.errors import KonkordError


def env_float(name: str, default: float) -> float:
    """A float from the environment (tests shorten backoff and timeouts this way)."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        raise KonkordError(f"{name}={raw!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise KonkordError(f"{name}={raw!r}: expected a finite number, 0 or more")
    return value


_litellm: Any = None


def load_litellm() -> Any:
    """Import litellm once, with the bundled cost map and the offline sim provider registered.

    The bundled cost map (LITELLM_LOCAL_MODEL_COST_MAP, unless the user set it) keeps costs
    reproducible and keeps the import from fetching anything.
    """
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        load_dotenv_file()
        import litellm

        litellm.suppress_debug_info = True
        litellm.telemetry = False
        litellm.drop_params = True
        from konkord import sim

        sim.register(litellm)
        _litellm = litellm
    return _litellm


# litellm silences pydantic's warning about its ReadOnly TypedDicts with a filter set at import;
# a test runner that resets filters between tests drops it, and the warning (raised when a
# response type is first built) would then fail a call that has nothing wrong with it.
_READONLY_WARNING = r".*`ReadOnly` qualifier.*"


def keep_litellm_warnings_quiet() -> None:
    """Put litellm's own warning filter back in front if something reset the filters."""
    first = warnings.filters[0] if warnings.filters else None
    if first is None or first[0] != "ignore" or getattr(first[1], "pattern", None) != (
        _READONLY_WARNING
    ):
        warnings.filterwarnings("ignore", message=_READONLY_WARNING)


def is_offline_model(model: str) -> bool:
    """Whether a model is answered by Konkord's own simulated provider (no network, no key)."""
    return model.startswith(("sim/", "sim-judge/"))


def classify_error(exc: BaseException, litellm: Any) -> str:
    """"permanent" (auth, bad request, context window, ...: not worth a retry) or "transient"."""
    if isinstance(exc, RemoteCallError):
        return exc.kind
    permanent = (
        litellm.AuthenticationError,
        litellm.BadRequestError,
        litellm.ContextWindowExceededError,
        litellm.NotFoundError,
        litellm.PermissionDeniedError,
        litellm.ContentPolicyViolationError,
        litellm.UnsupportedParamsError,
    )
    if isinstance(exc, permanent):
        return "permanent"
    return "transient"


def short_error(exc: BaseException) -> str:
    """The error in one line, keys redacted, at most 500 characters."""
    if isinstance(exc, RemoteCallError):
        return exc.text
    text = redact(f"{type(exc).__name__}: {exc}")
    return text if len(text) <= 500 else text[:497] + "..."


def retry_after_s(exc: BaseException) -> float | None:
    """The server's Retry-After, in seconds, when a rate-limit error carries one."""
    if isinstance(exc, RemoteCallError):
        return exc.retry_after
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    try:
        value = headers.get("retry-after")
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


class MalformedResponse(Exception):
    """The server answered, but not with a usable completion (no choices, no message)."""


class RemoteCallError(Exception):
    """A call made in a worker process failed: the worker's reading of the error, as plain
    data (litellm's exception objects need not pickle). `kind` is classify_error's, `text`
    short_error's and `retry_after` retry_after_s's, all read in the worker."""

    def __init__(self, kind: str, text: str, retry_after: float | None) -> None:
        super().__init__(text)
        self.kind = kind
        self.text = text
        self.retry_after = retry_after

    @classmethod
    def of(cls, exc: BaseException, litellm: Any) -> RemoteCallError:
        """The plain-data reading of an exception raised by a call."""
        return cls(classify_error(exc, litellm), short_error(exc), retry_after_s(exc))
