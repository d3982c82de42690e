"""How numbers and free-form data look on the pages: presentation only, no computation.

Undefined values (None) print as "undefined" or "n/a", never as 0, because the results file
uses None for "no data".
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import Any

from markupsafe import Markup, escape

from konkord.results.schema import Interval, Kappa, Proportion


def fmt_pct(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{100 * value:.{digits}f}%"


def justified_digits(low: float | None, high: float | None, percent: bool = True) -> int:
    """Decimals an interval justifies: none when it spans 2 points or more (72.4% with an
    interval of 64% to 81% claims a precision the data does not have), one, or at most two."""
    if low is None or high is None:
        return 1
    width = (high - low) * (100 if percent else 1)
    return 0 if width >= 2 else 1 if width >= 0.2 else 2


def fmt_interval(value: Interval | None, percent: bool = True) -> str:
    if value is None or value.estimate is None:
        return "undefined"
    digits = justified_digits(value.low, value.high, percent)

    def one(x: float | None) -> str:
        if x is None:
            return "?"
        return fmt_pct(x, digits) if percent else f"{x:.{digits}f}"

    if value.low is None or value.high is None:
        return one(value.estimate)
    return f"{one(value.estimate)} ({one(value.low)} to {one(value.high)})"


def fmt_proportion(value: Proportion | None) -> str:
    if value is None or value.rate is None or value.n == 0:
        return "undefined (no items)" if value is None or value.n == 0 else "undefined"
    return fmt_rate(value.rate, value.low, value.high, value.k, value.n)


def fmt_rate(
    rate: float | None,
    low: float | None = None,
    high: float | None = None,
    k: int | None = None,
    n: int | None = None,
    compact: bool = False,
) -> str:
    """A rate with its 95% interval and count, at the precision the interval justifies;
    `compact` writes the interval as 73–99% for dense tables."""
    if rate is None:
        return "undefined"
    digits = justified_digits(low, high)
    span = ""
    if low is not None and high is not None and compact:
        span = f" ({100 * low:.{digits}f}–{fmt_pct(high, digits)})"
    elif low is not None and high is not None:
        span = f" ({fmt_pct(low, digits)} to {fmt_pct(high, digits)})"
    count = f", {k} of {n}" if k is not None and n is not None else ""
    return f"{fmt_pct(rate, digits)}{span}{count}"


def fmt_proportion_plain(value: Proportion | None) -> str:
    """A proportion with its task-clustered interval and, beside it, the plain Wilson one
    (for tables that reproduce a published table, which used plain Wilson)."""
    text = fmt_proportion(value)
    if value is None or value.plain_low is None or value.plain_high is None:
        return text
    return f"{text}; plain Wilson {fmt_pct(value.plain_low)} to {fmt_pct(value.plain_high)}"


def fmt_kappa(value: Kappa | None) -> str:
    if value is None or value.value is None:
        return "undefined"
    if value.low is None or value.high is None:
        return f"{value.value:.2f}"
    return f"{value.value:.2f} ({value.low:.2f} to {value.high:.2f})"


def fmt_coefficient(value: Interval | None) -> str:
    """A log-odds coefficient with its interval, signed: "+0.41 (0.30 to 0.52)"."""
    if value is None or value.estimate is None:
        return "not estimated"
    if value.low is None or value.high is None:
        return f"{value.estimate:+.2f}"
    return f"{value.estimate:+.2f} ({value.low:+.2f} to {value.high:+.2f})"


def fmt_money(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


def fmt_line_cost(line: Any) -> str:
    """A cost line's dollars; "unknown" when nothing about the calls was recorded (no tokens,
    no latency: answers imported from a published set), as latency then says n/a. A free
    model (a simulated one) that recorded its tokens still costs $0.0000."""
    nothing_recorded = (
        not line.tokens_in and not line.tokens_out and line.median_latency_s is None
    )
    if line.cost_usd is None or (nothing_recorded and not line.cost_usd):
        return "unknown"
    return fmt_money(line.cost_usd)


def fmt_seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} s"


@lru_cache(maxsize=4096)
def anchor(*parts: str) -> str:
    """An HTML id from arbitrary names: readable, and unique thanks to a short hash. Cached:
    every task page asks for the same few (one per model and per judged pair)."""
    joined = "\x00".join(parts)
    readable = re.sub(r"[^a-z0-9]+", "-", joined.lower()).strip("-")[:40]
    return (
        f"{readable}-{hashlib.sha256(joined.encode()).hexdigest()[:6]}"
        if readable
        else f"x-{hashlib.sha256(joined.encode()).hexdigest()[:6]}"
    )


def winner_text(winner: str | None) -> str:
    if winner is None:
        return "no verdict"
    return "tie" if winner == "tie" else winner


def _is_rate_key(key: str) -> bool:
    return key in {"rate", "low", "high"} or key.startswith(("rate_", "low_", "high_"))


def _scalar_html(key: str, value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(escape("n/a" if value is None else ("yes" if value else "no")))
    if isinstance(value, float):
        return fmt_pct(value) if _is_rate_key(key) else f"{value:.3g}"
    return str(escape(value))


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def data_html(value: Any, key: str = "") -> Markup:
    """Free-form result data (the `objective` block) as small tables, every value escaped:
    dicts become key/value rows, lists of dicts become tables, nesting becomes sections."""
    if _is_scalar(value):
        return Markup(_scalar_html(key, value))
    if isinstance(value, dict):
        scalars = [(k, v) for k, v in value.items() if _is_scalar(v)]
        nested = [(k, v) for k, v in value.items() if not _is_scalar(v)]
        parts = []
        if scalars:
            rows = "".join(
                f'<tr><th scope="row">{escape(str(k).replace("_", " "))}</th>'
                f"<td>{_scalar_html(str(k), v)}</td></tr>"
                for k, v in scalars
            )
            parts.append(
                f'<div class="scroll"><table class="data"><tbody>{rows}</tbody></table></div>'
            )
        for k, v in nested:
            parts.append(f"<h5>{escape(str(k).replace('_', ' '))}</h5>{data_html(v, str(k))}")
        return Markup("".join(parts))
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        columns: list[str] = []
        for item in value:
            columns.extend(str(k) for k in item if str(k) not in columns)
        head = "".join(f'<th scope="col">{escape(c.replace("_", " "))}</th>' for c in columns)
        body = "".join(
            "<tr>"
            + "".join(
                f"<td>{_scalar_html(c, item.get(c)) if _is_scalar(item.get(c)) else data_html(item.get(c), c)}</td>"
                for c in columns
            )
            + "</tr>"
            for item in value
        )
        return Markup(
            f'<div class="scroll"><table class="data"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>"
        )
    if isinstance(value, list):
        return Markup(", ".join(str(data_html(item, key)) for item in value) or "none")
    return Markup(escape(str(value)))
