"""Simulated labellers: demo labels from a reader who sees the answers' visible quality.

A simulated person takes the same queue a real one would (`konkord.stages.label.sample`), reads both
answers the way the simulated judge does (`konkord.sim.read_answer`: fewer visible defects wins,
equal is a tie) and, with probability `accuracy`, labels what it read; otherwise it picks one of
the two other outcomes. Labels go to the evidence log with source "simulated", so the site and
the calibration can tell them from human ones. Deterministic from the seed: each label depends
only on (seed, labeller, comparison), and a second call adds nothing already labelled.
"""

from __future__ import annotations

import hashlib
import random

from konkord.configuration.runspec import RunSpec
from konkord.configuration.suite import Suite, Task
from konkord.evidence.log import EvidenceLog
from konkord.sim import TaskView, read_answer


def _task_view(suite: Suite, task: Task) -> TaskView:
    return TaskView(
        prompt=task.prompt,
        context=suite.context or "",
        reference=task.reference,
        language=suite.answer_language,
    )


def _rng(*parts: object) -> random.Random:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def true_winner(
    suite: Suite, task: Task, model_a: str, text_a: str, model_b: str, text_b: str
) -> str:
    """The better answer as a careful reader sees it: model_a, model_b or "tie"."""
    view = _task_view(suite, task)
    defects_a = read_answer(text_a, view).defects
    defects_b = read_answer(text_b, view).defects
    if defects_a == defects_b:
        return "tie"
    return model_a if defects_a < defects_b else model_b


def noisy_label(truth: str, model_a: str, model_b: str, accuracy: float, rng: random.Random) -> str:
    """The truth with probability `accuracy`, else one of the two other outcomes at random."""
    if rng.random() < accuracy:
        return truth
    others = [o for o in (model_a, model_b, "tie") if o != truth]
    return others[0] if rng.random() < 0.5 else others[1]


def simulate_labels(spec: RunSpec, labeller_name: str, accuracy: float, n: int, seed: int) -> int:
    """Label up to `n` comparisons of the run as `labeller_name`; returns how many were added.

    Comparisons come from the run's current answers in the order a person would be shown them
    (the label queue with this seed); those this labeller already labelled are not redone.
    """
    from konkord.stages.label.design import inclusion_probabilities
    from konkord.stages.label.labels import current_labels, record_label
    from konkord.stages.label.sample import label_queue, pool_for_run
    from konkord.stages.run import current_answers

    if not 0.0 <= accuracy <= 1.0:
        raise ValueError(f"accuracy {accuracy} must be between 0 and 1")
    log = EvidenceLog(spec.run_dir)
    pool = pool_for_run(spec, log)
    queue = label_queue(pool, current_labels(log), labeller_name, seed, n, overlap=0.0)
    answers = current_answers(log, spec.suite, spec.settings)
    inclusion = inclusion_probabilities(pool, n)
    written = 0
    for item in queue.items:
        comparison = item.comparison
        task = spec.suite.task(comparison.task_id)
        text_a = str(answers[(comparison.task_id, comparison.model_a)]["text"])
        text_b = str(answers[(comparison.task_id, comparison.model_b)]["text"])
        truth = true_winner(
            spec.suite, task, comparison.model_a, text_a, comparison.model_b, text_b
        )
        rng = _rng("sim-label", seed, labeller_name, *comparison.label_key(labeller_name))
        winner = noisy_label(truth, comparison.model_a, comparison.model_b, accuracy, rng)
        record_label(
            log, comparison, winner, labeller_name, item.shown_first, source="simulated",
            inclusion_probability=inclusion[comparison], sample_seed=seed,
        )
        written += 1
    return written


def simulate_plan_labels(spec: RunSpec) -> dict[str, int]:
    """Run every simulated labeller of the run's label plan; labeller -> labels added."""
    plan = spec.label_plan
    return {
        person.name: simulate_labels(spec, person.name, person.accuracy, plan.n, plan.seed)
        for person in plan.simulated_labellers
    }
