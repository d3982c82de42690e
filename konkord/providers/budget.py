"""Know the bill before paying it: estimates for --dry-run, and the --max-cost cap.

An estimate counts the real prompts' tokens with litellm's token counter and bounds each reply
by max_tokens, so the cost range runs from "every reply empty" to "every reply at the cap".
The cap is kept at the door: a call is launched only if what the run has spent (its evidence,
this process included) plus the upper estimate of every call in flight plus this call's stays
within it; the estimate's prompt tokens are scaled by what the provider is seen to bill (see
Budget), and each reply settles at its reported usage the moment it lands. Once one call is refused, no later one is launched; calls in flight finish and are
recorded, so a rerun with a higher cap continues from there and pays for nothing twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from konkord.configuration.call_settings import CallSettings, Message
from konkord.configuration.runs_config import Price
from konkord.errors import KonkordError, NotLaunched
from konkord.evidence.log import EvidenceLog
from konkord.providers.batch_format import BATCH_DISCOUNT


class BudgetReached(NotLaunched):
    """A call was not launched: it could have taken the run past --max-cost."""


@dataclass(frozen=True)
class TokenPrice:
    """Dollars per token, in and out."""

    input: float
    output: float


def token_price(model: str, prices: dict[str, Price], batch: bool = False) -> TokenPrice | None:
    """runs.json's price, else litellm's cost map (batch rates with batch); None when unknown."""
    from konkord.providers.loading import is_offline_model, load_litellm

    price = prices.get(model)
    if price is not None:
        scale = BATCH_DISCOUNT if batch else 1.0
        return TokenPrice(
            price.input_per_million / 1e6 * scale, price.output_per_million / 1e6 * scale
        )
    if is_offline_model(model):
        return TokenPrice(0.0, 0.0)
    try:
        info = load_litellm().get_model_info(model)
    except Exception:
        return None
    live_in, live_out = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if live_in is None or live_out is None:
        return None
    if batch:
        return TokenPrice(
            float(info.get("input_cost_per_token_batches") or live_in * BATCH_DISCOUNT),
            float(info.get("output_cost_per_token_batches") or live_out * BATCH_DISCOUNT),
        )
    return TokenPrice(float(live_in), float(live_out))


def count_tokens(model: str, messages: list[Message]) -> int:
    """Prompt tokens of one call by litellm's counter (the model's tokenizer where it knows it)."""
    from konkord.providers.loading import load_litellm

    return int(load_litellm().token_counter(model=model, messages=messages))


def spent_in_evidence(log: EvidenceLog) -> float:
    """Dollars the run's evidence says were paid: every answer and verdict record's cost."""
    total = 0.0
    for stream in ("answers", "verdicts"):
        for record in log.records(stream):
            cost = record.get("cost_usd")
            if isinstance(cost, (int, float)):
                total += float(cost)
    return total


@dataclass(eq=False)
class Hold:
    """What one launched call holds against the cap until its reply lands."""

    model: str
    prompt_tokens: int  # litellm's count of the prompt
    output_usd: float  # a reply at max_tokens


@dataclass
class Budget:
    """The --max-cost cap, kept at the door (ModelClient.complete and BatchClient.complete).

    litellm's token count can fall short of what a provider bills (a chat template, a hidden
    system prompt). So each model's first live call goes alone; its reply's reported prompt
    tokens over litellm's count give the model's ratio, and every call held or launched after
    that is held at counted tokens x ratio (the largest ratio seen; never below 1). Each reply
    settles at the cost its reported usage gives, as soon as it lands.
    """

    cap_usd: float
    prices: dict[str, Price]
    spent_before_usd: float = 0.0
    batch: bool = False  # batched calls are all in flight at once: no first call alone
    spent_usd: float = 0.0  # by this process
    launched: int = 0
    refused: int = 0
    _price_of: dict[str, TokenPrice | None] = field(default_factory=dict, init=False)
    _prompt_in_flight: dict[str, int] = field(default_factory=dict, init=False)  # per model
    _output_in_flight_usd: float = field(default=0.0, init=False)
    _ratio: dict[str, float] = field(default_factory=dict, init=False)
    _probe: dict[str, asyncio.Event] = field(default_factory=dict, init=False)

    @property
    def closed(self) -> bool:
        """Whether a call has been refused (after which none is launched)."""
        return self.refused > 0

    @property
    def in_flight_usd(self) -> float:
        """The upper estimate of every call in flight, at each model's ratio as known now."""
        prompts = sum(
            tokens * self._ratio.get(model, 1.0) * self.price(model).input
            for model, tokens in self._prompt_in_flight.items()
        )
        return prompts + self._output_in_flight_usd

    def _held(self, hold: Hold) -> float:
        price = self.price(hold.model)
        ratio = self._ratio.get(hold.model, 1.0)
        return hold.prompt_tokens * ratio * price.input + hold.output_usd

    def price(self, model: str) -> TokenPrice:
        if model not in self._price_of:
            self._price_of[model] = token_price(model, self.prices, self.batch)
        found = self._price_of[model]
        if found is None:
            raise KonkordError(
                f"--max-cost: no price is known for {model}; add its prices to the run in "
                'runs.json ("prices": {"MODEL": {"input_per_million": ..., '
                '"output_per_million": ...}})'
            )
        return found

    def upper_estimate(self, model: str, messages: list[Message], settings: CallSettings) -> float:
        """The most one call can cost: its prompt's tokens (at the model's ratio) and a reply
        at max_tokens."""
        return self._held(self._hold(model, messages, settings))

    def _hold(self, model: str, messages: list[Message], settings: CallSettings) -> Hold:
        price = self.price(model)
        prompt = count_tokens(model, messages) if price.input else 0
        return Hold(model, prompt, settings.max_tokens * price.output)

    async def reserve(self, model: str, messages: list[Message], settings: CallSettings) -> Hold:
        """Hold this call's upper estimate, or raise BudgetReached (and launch nothing more).

        While a model's first call is out and its ratio unknown, its other calls wait here."""
        while not self.batch and model not in self._ratio and model in self._probe:
            await self._probe[model].wait()
        hold = self._hold(model, messages, settings)
        total = self.spent_before_usd + self.spent_usd + self.in_flight_usd + self._held(hold)
        if self.closed or total > self.cap_usd + 1e-12:
            self.refused += 1
            raise BudgetReached(f"--max-cost {self.cap_usd:g}: not launched")
        if model not in self._ratio and model not in self._probe:
            self._probe[model] = asyncio.Event()
        self._prompt_in_flight[model] = self._prompt_in_flight.get(model, 0) + hold.prompt_tokens
        self._output_in_flight_usd += hold.output_usd
        self.launched += 1
        return hold

    def settle(self, hold: Hold, cost: float | None, prompt_tokens: int | None = None) -> None:
        """A reserved call ended: release its hold and count what it cost (the hold if
        unknown). `prompt_tokens`, what the provider reported for a reply that landed (None
        for a call that failed or was cancelled), sets the model's ratio."""
        held = self._held(hold)
        self._prompt_in_flight[hold.model] -= hold.prompt_tokens
        self._output_in_flight_usd -= hold.output_usd
        if prompt_tokens is not None:  # a reply landed (0: no usage reported, the count stands)
            seen = max(1.0, prompt_tokens / hold.prompt_tokens) if hold.prompt_tokens else 1.0
            self._ratio[hold.model] = max(seen, self._ratio.get(hold.model, 1.0))
        probe = self._probe.get(hold.model)
        if probe is not None and not probe.is_set():
            if hold.model not in self._ratio:  # the first call failed: the next one goes alone
                del self._probe[hold.model]
            probe.set()
        self.spent_usd += held if cost is None else cost

    def report(self) -> str:
        """One line for the end of a stage that hit the cap."""
        return (
            f"stopped at --max-cost ${self.cap_usd:g}: ${self.spent_before_usd:.4f} spent "
            f"before, ${self.spent_usd:.4f} now ({self.launched} calls made); "
            f"{self.refused} call{'s' if self.refused != 1 else ''} not launched. Run the "
            "same command with a higher --max-cost to continue (nothing is paid twice)"
        )


@dataclass
class Estimate:
    """What one model (or judge) still owes the run, before anything is called."""

    model: str
    role: str  # "model" or "judge"
    calls: int = 0
    tokens_in: int = 0
    max_tokens_out: int = 0
    price: TokenPrice | None = None
    rpm: int | None = None
    tpm: int | None = None

    @property
    def cost_low(self) -> float | None:
        return None if self.price is None else self.tokens_in * self.price.input

    @property
    def cost_high(self) -> float | None:
        if self.price is None:
            return None
        return self.tokens_in * self.price.input + self.max_tokens_out * self.price.output

    def minutes(self) -> float | None:
        """Minutes at the configured rate limits (None when no limit is configured)."""
        times = []
        if self.rpm:
            times.append(self.calls / self.rpm)
        if self.tpm:
            times.append((self.tokens_in + self.max_tokens_out) / self.tpm)
        return max(times) if times else None


def estimate_calls(
    calls: Iterable[tuple[str, list[Message], int]],
    role: str,
    prices: dict[str, Price],
    batch: bool,
    limits: Any = None,
) -> list[Estimate]:
    """Estimates per model from (model, messages, max_tokens) of every call still to make."""
    by_model: dict[str, Estimate] = {}
    for model, messages, max_tokens in calls:
        found = by_model.get(model)
        if found is None:
            found = by_model[model] = Estimate(
                model, role, price=token_price(model, prices, batch),
                rpm=limits.rpm(model) if limits is not None else None,
                tpm=limits.tpm(model) if limits is not None else None,
            )
        found.calls += 1
        found.tokens_in += count_tokens(model, messages)
        found.max_tokens_out += max_tokens
    return list(by_model.values())


def _money(value: float | None) -> str:
    return "unknown (no price)" if value is None else f"${value:,.4f}"


def _duration(minutes: float | None, batch: bool) -> str:
    if batch:
        return "within the provider's 24 h batch window"
    if minutes is None:
        return "no rate limit configured"
    if minutes < 1:
        return f"{minutes * 60:.0f} s at the configured rate limits"
    if minutes < 120:
        return f"{minutes:.1f} min at the configured rate limits"
    return f"{minutes / 60:.1f} h at the configured rate limits"


def estimate_lines(estimates: list[Estimate], batch: bool) -> list[str]:
    """The dry-run report: one line per model or judge, and a total."""
    if not estimates:
        return ["nothing to call: everything is recorded"]
    lines = []
    for e in estimates:
        lines.append(
            f"{e.role} {e.model}: {e.calls} calls, {e.tokens_in:,} tokens in, up to "
            f"{e.max_tokens_out:,} out; cost {_money(e.cost_low)} to {_money(e.cost_high)}"
            f"{' at batch prices' if batch else ''}; {_duration(e.minutes(), batch)}"
        )
    lows = [e.cost_low for e in estimates]
    highs = [e.cost_high for e in estimates]
    low = None if None in lows else sum(x for x in lows if x is not None)
    high = None if None in highs else sum(x for x in highs if x is not None)
    calls = sum(e.calls for e in estimates)
    lines.append(f"total: {calls} calls, cost {_money(low)} to {_money(high)}; nothing was called")
    return lines
