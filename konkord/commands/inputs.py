"""Values a person types on the command line: numbers finite, whole where they must be and in
range, and run names that are slugs.

click's own FloatRange lets `nan` through every bound (nan compares false with all of them) and
reports a bad value in four lines of usage; these types refuse nan, inf, out-of-range values and
an empty run name in the one line every Konkord error takes:
`--max-cost nan: expected a finite number of dollars, 0 or more`.
"""

from __future__ import annotations

import math
from typing import Any

import click

from konkord.configuration.limits import MAX_TOKENS_LIMIT, TEMPERATURE_LIMIT
from konkord.configuration.limits import SEED_LIMIT as SEED_LIMIT
from konkord.errors import KonkordError


def _plain(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


class Number(click.ParamType[Any]):
    """A finite int or float within [low, high] (the low end open with low_open)."""

    def __init__(
        self,
        kind: type[int] | type[float],
        low: float | None = None,
        high: float | None = None,
        *,
        low_open: bool = False,
        unit: str = "",
        words: str = "",
    ) -> None:
        self.kind = kind
        self.words = words
        self.low, self.high, self.low_open = low, high, low_open
        self.unit = unit
        self.name = "integer" if kind is int else "number"

    def expected(self) -> str:
        """What is wanted, in words: 'a whole number from 1 to 65,535'."""
        if self.words:
            return self.words
        what = "a whole number" if self.kind is int else "a finite number"
        if self.unit:
            what += f" of {self.unit}"
        if self.low is not None and self.high is not None and not self.low_open:
            return f"{what} from {_plain(self.low)} to {_plain(self.high)}"
        parts = []
        if self.low is not None:
            parts.append(f"more than {_plain(self.low)}" if self.low_open else
                         f"{_plain(self.low)} or more")
        if self.high is not None:
            parts.append(f"at most {_plain(self.high)}")
        return ", ".join([what, *parts])

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        option = _option_name(param)
        text = str(value).strip()
        number: float
        try:
            if isinstance(value, bool):
                raise ValueError
            if self.kind is int:
                number = value if isinstance(value, int) else int(text)
            else:
                number = float(value) if isinstance(value, int | float) else float(text)
        except (ValueError, OverflowError):
            raise KonkordError(f"{option} {text}: expected {self.expected()}") from None
        if isinstance(number, float) and not math.isfinite(number):
            raise KonkordError(f"{option} {text}: expected {self.expected()}")
        too_low = self.low is not None and (
            number <= self.low if self.low_open else number < self.low
        )
        too_high = self.high is not None and number > self.high
        if too_low or too_high:
            shown = text if len(text) <= 40 else text[:37] + "..."
            raise KonkordError(f"{option} {shown}: expected {self.expected()}")
        return number


def _option_name(param: click.Parameter | None) -> str:
    if param is None:
        return "value"
    names = [name for name in param.opts if name.startswith("--")]
    return names[0] if names else (param.human_readable_name or "value")


def finite(low: float | None = None, high: float | None = None, *, low_open: bool = False,
           unit: str = "") -> Number:
    """A finite float option, optionally bounded."""
    return Number(float, low, high, low_open=low_open, unit=unit)


def whole(low: int | None = None, high: int | None = None, words: str = "") -> Number:
    """A whole-number option, optionally bounded."""
    return Number(int, low, high, words=words)


COUNT = whole(1, 10_000)  # parallel calls or checks: at least one, or nothing ever starts
PORT = whole(1, 65_535)
SEED = whole(-SEED_LIMIT - 1, SEED_LIMIT, "a whole number that fits in 64 bits")
MAX_TOKENS = whole(1, MAX_TOKENS_LIMIT)
TEMPERATURE = finite(0, TEMPERATURE_LIMIT)
PROBABILITY = finite(0, 1)
SECONDS = finite(0, 7 * 24 * 3600, low_open=True, unit="seconds")
DOLLARS = finite(0, unit="dollars")


class RunName(click.ParamType[Any]):
    """A run name: a slug, so never empty (`--run ""` would otherwise fall back to a default)."""

    name = "name"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from konkord.configuration.names import SLUG, slug_problem

        text = str(value)
        if not SLUG.match(text):
            raise KonkordError(f"{_option_name(param)}: run name {slug_problem(text)}")
        return text


RUN_NAME = RunName()
