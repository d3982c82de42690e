"""Names and parameters of simulated models and judges: `sim/atlas:strength=1.5`."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, fields, replace
from typing import Any

from konkord.errors import KonkordError

# ---------------------------------------------------------------------------------------------
# Names and parameters


@dataclass(frozen=True)
class SimModelParams:
    """A simulated model: its latent strength and how much it varies from task to task."""

    name: str
    strength: float
    task_effect: float = 0.5
    verbosity: float = 0.5  # probability of adding a (quality-neutral) explanation paragraph


@dataclass(frozen=True)
class SimJudgeParams:
    """A simulated judge: how often it reads a pair right, and what it does when unsure."""

    name: str
    accuracy: float = 0.85
    position_bias: float = 0.5  # when unsure: probability of taking the answer shown first
    length_bias: float = 0.0  # when unsure: probability of taking the longer answer
    tie_rate: float = 0.1  # when unsure: probability of answering TIE
    # when unsure: probability of following a fixed arbitrary order of the answer texts (by
    # their hash): the same in both orders and transitive, so consistent, and blind to quality
    fixed_order: float = 0.0
    # The confidence it reports (the log-probabilities of its verdict token, for a cascade):
    sure_confidence: float = 0.9  # typical probability it puts on a verdict it read
    slot_overconfidence: float = 0.0  # when unsure and taking Answer 1: chance it is near-certain


JUDGE_PRESETS: dict[str, dict[str, float]] = {
    "fair": {},
    "careful": {"accuracy": 0.95, "tie_rate": 0.2},
    "sloppy": {"accuracy": 0.6},
    "first": {"accuracy": 0.0, "position_bias": 1.0, "tie_rate": 0.0},  # pure position bias
    "coin": {"accuracy": 0.0, "position_bias": 0.5, "tie_rate": 0.0},
    "verbose": {"accuracy": 0.7, "length_bias": 0.8},
    "blind": {"accuracy": 0.0, "fixed_order": 1.0, "tie_rate": 0.0},  # consistent, quality-blind
    # a cheap first-pass judge: often right and sure, but near-certain of Answer 1 when unsure
    "quick": {
        "accuracy": 0.7,
        "position_bias": 0.75,
        "length_bias": 0.3,
        "tie_rate": 0.05,
        "sure_confidence": 0.88,
        "slot_overconfidence": 0.8,
    },
}

_MODEL_KEYS = {f.name for f in fields(SimModelParams)} - {"name"}
_JUDGE_KEYS = {f.name for f in fields(SimJudgeParams)} - {"name"}
_UNIT_KEYS = {
    "accuracy",
    "position_bias",
    "length_bias",
    "tie_rate",
    "verbosity",
    "fixed_order",
    "sure_confidence",
    "slot_overconfidence",
}


def seeded_rng(*parts: Any) -> random.Random:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def split_sim_name(model: str) -> tuple[str, dict[str, float]]:
    """`sim/atlas:strength=1.5` -> ("atlas", {"strength": 1.5}); the provider prefix is optional."""
    bare = model.split("/", 1)[1] if model.startswith(("sim/", "sim-judge/")) else model
    base, _, spec = bare.partition(":")
    if not base:
        raise KonkordError(f'"{model}": a simulated model needs a name, e.g. sim/atlas')
    values: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        key, eq, raw = item.partition("=")
        try:
            if not eq:
                raise ValueError
            values[key.strip()] = float(raw)
        except ValueError:
            raise KonkordError(
                f'"{model}": "{item}" is not key=number (write e.g. {base}:strength=1.2)'
            ) from None
    return base, values


def _checked(model: str, values: dict[str, float], allowed: set[str]) -> dict[str, float]:
    for key, value in values.items():
        if key not in allowed:
            raise KonkordError(
                f'"{model}": unknown parameter "{key}" (valid: {", ".join(sorted(allowed))})'
            )
        if key in _UNIT_KEYS and not 0.0 <= value <= 1.0:
            raise KonkordError(f'"{model}": {key}={value} must be between 0 and 1')
        if key == "task_effect" and value < 0:
            raise KonkordError(f'"{model}": task_effect={value} must not be negative')
    return values


def model_params(model: str) -> SimModelParams:
    """The parameters of `sim/<name>[:key=value,...]`; unset ones are derived from the name."""
    base, values = split_sim_name(model)
    _checked(model, values, _MODEL_KEYS)
    rng = seeded_rng("sim-model-defaults", base)
    defaults = SimModelParams(
        name=base,
        strength=round(max(-2.5, min(2.5, rng.gauss(0.0, 1.0))), 3),
        verbosity=round(rng.uniform(0.2, 0.8), 3),
    )
    overrides: dict[str, Any] = dict(values)
    return replace(defaults, **overrides)


def judge_params(model: str) -> SimJudgeParams:
    """The parameters of `sim-judge/<name>[:key=value,...]`, starting from a preset if named."""
    base, values = split_sim_name(model)
    _checked(model, values, _JUDGE_KEYS)
    overrides: dict[str, Any] = {**JUDGE_PRESETS.get(base, {}), **values}
    return replace(SimJudgeParams(name=base), **overrides)


def validate_sim_name(model: str) -> None:
    """Raise a KonkordError naming the problem if a `sim/` or `sim-judge/` name is malformed."""
    if model.startswith("sim-judge/"):
        judge_params(model)
    elif model.startswith("sim/"):
        model_params(model)
