"""Offline simulated models (`sim/<name>`) and judges (`sim-judge/<name>`), as a litellm provider.

Registered with litellm as custom providers so that the real code path (litellm, the judge frame,
the verdict parser, the evidence log) runs with no network and no key. Everything is deterministic
from the model name, the messages and the seed.

The latent model (the one `konkord simulate` draws from, there without the text): a model has a
strength `s` (logits), each task a difficulty `d`, each (model, task) a task effect
`u ~ N(0, task_effect)`, and each answer a quality `q = s + u - d + e` with `e` a standard
logistic draw, so that answers compare as Bradley-Terry with task effects. The quality becomes
0 to 3 *visible defects* (one per logit below 1), which a reader (or the simulated judge) sees in
the text: plausible bugs in the reference solution of a code task, or policy breaks written into
the reference reply of a support task. Equal defects are a true tie, which `simulate` omits. The judge reads the defects and, when sure (probability
`accuracy`), prefers the answer with fewer; when unsure it says TIE (`tie_rate`), takes the
longer answer (`length_bias`), follows a fixed arbitrary order of the answer texts
(`fixed_order`: consistent in both orders and blind to quality), or takes the answer shown
first (`position_bias`).

Parameters go in the name after a colon: `sim/atlas:strength=1.5,task_effect=0.3`,
`sim-judge/careful:accuracy=0.9,position_bias=0.7,tie_rate=0.1`. A bare `sim/atlas` takes a
strength drawn from its name; judge presets are listed in `JUDGE_PRESETS`.

Also owns the plausible-bug mutator (mutate) the simulated code answers use.

May import: konkord.configuration (suite, judge frame), konkord.errors. Never providers (which
register this package with litellm) or anything above them.
"""

from __future__ import annotations

from konkord.sim.answers import sim_answer
from konkord.sim.judge import judge_decision, sim_judge_answer, sim_judge_reply
from konkord.sim.latent import MAX_DEFECTS, answer_quality, defects_for, task_difficulty
from konkord.sim.params import (
    JUDGE_PRESETS,
    SimJudgeParams,
    SimModelParams,
    judge_params,
    model_params,
    split_sim_name,
    validate_sim_name,
)
from konkord.sim.provider import register
from konkord.sim.reading import Reading, read_answer
from konkord.sim.tasks import (
    CURT_CLOSING,
    EXCEPTION_PHRASES,
    TaskView,
    policy_facts,
    reference_for,
    register_reference,
    register_suite,
    view_from_judge_message,
    view_from_messages,
)

__all__ = [
    "CURT_CLOSING",
    "EXCEPTION_PHRASES",
    "JUDGE_PRESETS",
    "MAX_DEFECTS",
    "Reading",
    "SimJudgeParams",
    "SimModelParams",
    "TaskView",
    "answer_quality",
    "defects_for",
    "judge_decision",
    "judge_params",
    "model_params",
    "policy_facts",
    "read_answer",
    "reference_for",
    "register",
    "register_reference",
    "register_suite",
    "sim_answer",
    "sim_judge_answer",
    "sim_judge_reply",
    "split_sim_name",
    "task_difficulty",
    "validate_sim_name",
    "view_from_judge_message",
    "view_from_messages",
]
