"""Statistical validity, shown against a known truth (issue 8, item 4).

Prints, on simulated fields with task-level random effects, judged by the simulated judge of
`konkord simulate` and analysed by the statistics `konkord report` uses:

  (a) coverage of the 95% intervals of the expected win rate, task bootstrap beside judgment
      bootstrap, at 14, 25 and 100 tasks (aim: >= 93% at 25 tasks and above, and never below
      the judgment bootstrap where tasks have random effects);
  (b) how often a supported claim is false (aim: <= 5%);
  (c) a judge with pure position bias: flip rate near 100% and all ties, in simulation and
      through the real run and judge stages with `sim-judge/first`;
  (d) how often rank groups split models of equal true strength (aim: <= 5%).

Run by hand: `python benchmarks/bench_validity.py [--fields 200] [--resamples 500]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from konkord import stats
from konkord.stages.simulate.simulate import (
    JudgeModel,
    Plan,
    draw_run,
    run_plan,
    strengths_from_spread,
)

REPO = Path(__file__).resolve().parent.parent
JUDGE = JudgeModel(accuracy=0.85, position_bias=0.5, tie_rate=0.1)
TWINS = np.array([0.8, 0.8, 0.0, 0.0, -0.8, -0.8])


def coverage(fields: int, resamples: int) -> None:
    """(a) Coverage of the expected-win-rate intervals, task against judgment bootstrap."""
    print("(a) coverage of 95% intervals of expected win rate vs field")
    print(
        f"    5 models 0.5 logits apart; judge accuracy {JUDGE.accuracy:g}, position bias "
        f"{JUDGE.position_bias:g}, tie rate {JUDGE.tie_rate:g}; {fields} fields per cell"
    )
    print(f"    {'task effect sd':>14} {'tasks':>6} {'task bootstrap':>15} {'judgments':>10}")
    strength = strengths_from_spread(5, 2.0)
    for effect in (0.0, 1.0, 2.0):
        for tasks in (14, 25, 100):
            found = []
            for mode in ("task", "judgments"):
                plan = Plan(strength, tasks, JUDGE, effect, fields, resamples, mode=mode)
                found.append(run_plan(plan).coverage)
            print(f"    {effect:>14g} {tasks:>6} {found[0]:>15.1%} {found[1]:>10.1%}")


def claims_and_groups(fields: int, resamples: int) -> None:
    """(b) false claims and (d) equal models split, on a field of three pairs of twins."""
    print("\n(b) supported claims that are false, (d) equal models split by rank groups")
    print(f"    six models in three pairs of equal strength {TWINS.tolist()}, task effect sd 1")
    print(
        f"    {'tasks':>6} {'claims':>7} {'false':>6} {'false share':>12} "
        f"{'runs w/ false':>14} {'twins split':>12}"
    )
    for tasks in (14, 25, 100):
        plan = Plan(TWINS, tasks, JUDGE, 1.0, fields, resamples)
        out = run_plan(plan)
        split = np.mean([1.0 - out.together[k, k + 1] for k in (0, 2, 4)])
        share = out.claims_false / max(1, out.claims_made)
        print(
            f"    {tasks:>6} {out.claims_made:>7} {out.claims_false:>6} {share:>12.1%} "
            f"{out.wrong_claims:>14.1%} {split:>12.1%}"
        )
    plan = Plan(np.zeros(5), 25, JUDGE, 1.0, fields, resamples)
    out = run_plan(plan)
    split = 1.0 - np.mean(out.together[np.triu_indices(5, k=1)])
    print(
        f"    five equal models, 25 tasks: {out.claims_made} claims (all false) in "
        f"{out.wrong_claims:.1%} of runs; a pair split in {split:.1%} of pair-runs"
    )


def position_bias(fields: int) -> None:
    """(c) A judge that always takes the answer shown first."""
    print("\n(c) a judge with pure position bias")
    judge = JudgeModel(accuracy=0.0, position_bias=1.0, tie_rate=0.0)
    plan = Plan(strengths_from_spread(5, 2.0), 25, judge, 1.0)
    rng = np.random.default_rng(0)
    flips = pairs = ties = 0
    largest = 0.0
    for _ in range(fields):
        comp, run_flips, _, score = draw_run(plan, 25, rng)
        flips += run_flips
        pairs += len(comp)
        ties += int(np.count_nonzero(score == 0.5))
        largest = max(largest, float(np.abs(stats.fit_bt(comp).log_strength).max()))
    print(
        f"    simulated, {fields} runs: flip rate {flips / pairs:.1%}, ties {ties / pairs:.1%}, "
        f"largest |log-strength| {largest:.2g}"
    )
    flip_rate, tie_share, n = _real_pipeline_position_judge()
    print(
        f"    real run + judge stages, sim-judge/first on the support suite: {n} pairs, "
        f"flip rate {flip_rate:.1%}, ties {tie_share:.1%}"
    )


def _real_pipeline_position_judge() -> tuple[float, float, int]:
    from konkord.configuration.runspec import resolve_run
    from konkord.evidence.log import EvidenceLog
    from konkord.evidence.verdicts import combine_verdicts, load_verdicts
    from konkord.providers.llm import ModelClient
    from konkord.stages.judge.judge import judge_run
    from konkord.stages.run import generate_answers

    here = Path.cwd()
    with tempfile.TemporaryDirectory() as scratch:
        os.chdir(scratch)
        try:
            runs = {
                "runs": [
                    {
                        "name": "bias",
                        "suite": str(REPO / "suites" / "support_replies.yaml"),
                        "models": [f"sim/m{k}:strength={1 - k / 2}" for k in range(4)],
                        "judges": ["sim-judge/first"],
                    }
                ]
            }
            Path("runs.json").write_text(json.dumps(runs))
            spec = resolve_run("bias")
            log = EvidenceLog(spec.run_dir)
            client = ModelClient(cache_dir=None)
            asyncio.run(generate_answers(log, spec.suite, spec.models, spec.settings, client))
            summary = asyncio.run(judge_run(spec, ["sim-judge/first"], client))
            combined = combine_verdicts(load_verdicts(log, "sim-judge/first", summary.frame_hash))
        finally:
            os.chdir(here)
    flipped = sum(v.flipped for v in combined)
    ties = sum(v.winner == "tie" for v in combined)
    return flipped / len(combined), ties / len(combined), len(combined)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fields", type=int, default=200, help="simulated runs per cell")
    parser.add_argument("--resamples", type=int, default=500, help="bootstrap resamples")
    args = parser.parse_args()
    started = time.perf_counter()
    coverage(args.fields, args.resamples)
    claims_and_groups(args.fields, args.resamples)
    position_bias(args.fields)
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
