"""The latent model: strengths, task difficulties, answer qualities, visible defects."""

from __future__ import annotations

import math

from konkord.sim.params import SimModelParams, seeded_rng

MAX_DEFECTS = 3


# ---------------------------------------------------------------------------------------------
# The latent model


def task_difficulty(task_key: str) -> float:
    """A task's difficulty, drawn from its text (logits; 0 is an average task)."""
    return seeded_rng("sim-task", task_key).gauss(0.0, 0.5)


def answer_quality(params: SimModelParams, task_key: str, seed: int | None) -> float:
    """The latent quality of one answer; common random numbers per model name, not per strength."""
    effect = seeded_rng("sim-effect", params.name, task_key).gauss(0.0, 1.0) * params.task_effect
    uniform = seeded_rng("sim-noise", params.name, task_key, seed).random()
    noise = math.log(uniform / (1.0 - uniform)) if 0.0 < uniform < 1.0 else 0.0
    return params.strength + effect - task_difficulty(task_key) + noise


def defects_for(quality: float) -> int:
    """Visible defects for a latent quality: none above 1, one more per logit below, at most 3.

    The tiers are centred on an average answer (a quarter of them flawless), so strengths
    above and below average both show in the text rather than all strong models writing the
    same flawless answer."""
    if quality > 1.0:
        return 0
    return min(MAX_DEFECTS, 1 + int(1.0 - quality))
