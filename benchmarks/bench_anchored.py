"""Coverage of people's ranking by judge-only, labels-only and human-anchored intervals.

Simulated fields (5 models, strengths N(0, 1), task effects sd 0.5, every pair once per
task): people label right 90% of the time and label a uniform random sample of comparisons;
the judge reads a pair right 80% of the time and favours one model by `bias` logits. The
truth is the win rate against the field that people's labels converge to. For each kind of
95% interval of that win rate (the judge's task bootstrap; the labels alone; the
prediction-powered fit of both) it prints the share of (field, model) intervals holding the
truth with its standard error over fields, the share of fields where every model is held,
and the mean width, with the power-tuning weight and what the labels are worth with the judge.
A second block checks that with an unbiased judge (as accurate as people) the judge-only and
anchored estimates agree: the share of models whose anchored estimate lies in the judge-only
interval, and the reverse.

Run: python benchmarks/bench_anchored.py [--fields 400] [--resamples 300]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from konkord.stats import bootstrap, comparisons
from konkord.stats.anchored_sim import coverage_study, simulate_biased_judge_field
from konkord.stats.ppi import anchored_bootstrap


def biased(args: argparse.Namespace) -> None:
    for bias in (1.0, 0.5, 0.0):
        start = time.perf_counter()
        study = coverage_study(
            args.fields, 5, args.tasks, args.labels, bias, resamples=args.resamples, seed=1
        )
        print(
            f"\nbias {bias:g} logits toward one model, {args.tasks} tasks, {args.labels} labels, "
            f"{args.fields} fields ({time.perf_counter() - start:.0f} s)"
        )
        print(f"{'interval':<12} {'coverage':>9} {'+- se':>6} {'all models':>11} {'width':>7} {'+- se':>6}")
        for row in study.rows:
            print(
                f"{row.name:<12} {100 * row.coverage:>9.1f} {100 * row.coverage_se:>6.1f} "
                f"{100 * row.all_covered:>11.1f} {100 * row.mean_width:>7.2f} "
                f"{100 * row.width_se:>6.2f}"
            )
        print(
            f"lambda {study.mean_lambda:.2f} on average; {args.labels} labels with the judge are "
            f"worth {study.mean_effective_labels:.0f} labels alone"
        )


def unbiased(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(2)
    inside_judge = inside_anchored = total = 0
    for f in range(args.fields // 2):
        field = simulate_biased_judge_field(
            5, args.tasks, args.labels, 0.0, judge_accuracy=0.9, labeller_accuracy=0.9, seed=rng
        )
        judge = bootstrap(
            comparisons(field.judge_task, field.judge_i, field.judge_j, field.judge_score, 5,
                        args.tasks),
            n_resamples=args.resamples, seed=f,
        )
        anchored = anchored_bootstrap(field.data, n_resamples=args.resamples, seed=f).bootstrap
        jv = judge.intervals()["expected_win_rate"]
        av = anchored.intervals()["expected_win_rate"]
        a_point, j_point = anchored.point.expected_win_rate, judge.point.expected_win_rate
        inside_judge += int(((jv.lower <= a_point) & (a_point <= jv.upper)).sum())
        inside_anchored += int(((av.lower <= j_point) & (j_point <= av.upper)).sum())
        total += 5
    print(
        f"\nunbiased judge as accurate as people, {args.fields // 2} fields: judge-only estimate "
        f"inside the anchored interval {100 * inside_anchored / total:.1f}% (anchored estimate "
        f"inside the narrower judge-only interval {100 * inside_judge / total:.1f}%)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fields", type=int, default=400)
    parser.add_argument("--resamples", type=int, default=300)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--labels", type=int, default=150)
    args = parser.parse_args()
    biased(args)
    unbiased(args)


if __name__ == "__main__":
    main()
