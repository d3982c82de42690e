"""Pair designs on simulated fields: what a quarter of the judge calls buys, and whether the
intervals stay honest when the design is sparse or chosen adaptively.

Each field: 20 models whose log-strengths are the published MT-Bench single-answer scores
(GPT-4 8.99, GPT-3.5 7.94, Claude-v1 7.90, Vicuna-13B 6.39, Alpaca-13B 4.53, LLaMA-13B 2.61)
interpolated to 20 models and scaled by --scale (0.5: GPT-4 beats LLaMA-13B about 95% of the
time), task effects of sd --task-sd per model and task, ties at --tie-rate; every pair is drawn
on every task once, and each design judges a subset of those same outcomes:

  all        every pair on every task (100% of the calls)
  random     K pairs per task, balanced and connected, K = --share of all pairs
  adaptive   a balanced start of --start of the budget, then rounds of 10% of it given to
             unseparated neighbours (konkord.stats.design.next_round) after each fit; budget =
             --share of all the calls

Every fit is the report's: task bootstrap (expanded BCa), Wald floors and the exact sign test
(konkord.stats.gate). Columns per design, over the fields:

  calls        share of all-pairs calls used
  neighbours   correctly supported neighbouring orderings (of 19, true order), mean
  claims       supported orderings, mean
  wrong        fields with at least one wrong claim (target <= 5%)
  cover diff   coverage of all 190 pairwise difference intervals (target 93-97%)
  cover nbr    coverage of the 19 true-neighbour difference intervals

Run: python benchmarks/bench_design.py [--fields 20] [--resamples 300] [--tasks 200]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from konkord.stats.bt import Comparisons, comparisons
from konkord.stats.design import next_round, random_design, start_pairs_per_task
from konkord.stats.gate import gate
from konkord.stats.ranking import Ranking
from konkord.stats.resample import bootstrap
from konkord.stats.simfield import SimulatedField, simulate_field

MT_BENCH = [2.61, 4.53, 6.39, 7.90, 7.94, 8.99]


def strengths(n_models: int, scale: float) -> np.ndarray:
    """MT-Bench scores stretched to n_models, weakest first, as log-strengths."""
    points = np.linspace(0, len(MT_BENCH) - 1, n_models)
    return np.interp(points, np.arange(len(MT_BENCH)), MT_BENCH) * scale


def subset(field: SimulatedField, rows: np.ndarray) -> Comparisons:
    """The field's outcomes on the design's (task, i, j) rows (i < j)."""
    comp = field.comparisons
    m = comp.n_models
    a, b = np.triu_indices(m, k=1)
    pair_index = np.full((m, m), -1)
    pair_index[a, b] = np.arange(a.size)
    pick = rows[:, 0] * a.size + pair_index[rows[:, 1], rows[:, 2]]
    return comparisons(
        comp.task[pick], comp.i[pick], comp.j[pick], comp.score[pick], m, comp.n_tasks
    )


def fit(comp: Comparisons, resamples: int, seed: int) -> Ranking:
    return gate(bootstrap(comp, n_resamples=resamples, seed=seed), comp).ranking


def adaptive(
    field: SimulatedField,
    budget_pairs: int,
    resamples: int,
    seed: int,
    start: float,
    window: int,
    reach: float,
) -> tuple[np.ndarray, Ranking, int]:
    m, t = field.comparisons.n_models, field.comparisons.n_tasks
    k0 = start_pairs_per_task(m, t, budget_pairs, start)
    rows = random_design(m, t, k0, seed)
    judged = np.zeros((t, m, m), dtype=bool)
    judged[rows[:, 0], rows[:, 1], rows[:, 2]] = True
    rounds = 0
    while True:
        ranking = fit(subset(field, rows), resamples, seed)
        d = ranking.differences
        choice = next_round(
            ranking.order, ranking.supported, d.lower, d.upper, judged,
            pairs_left=budget_pairs - len(rows),
            round_pairs=max(1, math.ceil(0.1 * budget_pairs)),
            seed=seed * 100_003 + rounds + 1,
            reach=reach,
            window=window,
        )  # fmt: skip
        if choice.stop:
            return rows, ranking, rounds
        rounds += 1
        rows = np.concatenate([rows, choice.design])
        judged[choice.design[:, 0], choice.design[:, 1], choice.design[:, 2]] = True


def score(field: SimulatedField, ranking: Ranking) -> dict[str, float]:
    truth = field.target_log_strength
    m = truth.size
    true_order = np.argsort(-truth)
    sup = ranking.supported
    d = ranking.differences
    target = truth[:, None] - truth[None, :]
    inside = (d.lower <= target + 1e-12) & (target - 1e-12 <= d.upper)
    a, b = np.triu_indices(m, k=1)
    upper, lower = true_order[:-1], true_order[1:]
    wrong = bool((sup & (target < 0)).any())
    return {
        "neighbours": float(sup[upper, lower].sum()),
        "claims": float(sup.sum()),
        "wrong": float(wrong),
        "cover diff": float(inside[a, b].mean()),
        "cover nbr": float(inside[upper, lower].mean()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fields", type=int, default=20)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--resamples", type=int, default=300)
    parser.add_argument("--share", type=float, default=0.25)
    parser.add_argument("--scale", type=float, default=0.5)
    parser.add_argument("--task-sd", type=float, default=0.5)
    parser.add_argument("--tie-rate", type=float, default=0.1)
    parser.add_argument("--start", type=float, default=0.7, help="the adaptive start's share")
    parser.add_argument("--window", type=int, default=1, help="ranks apart a pair may be")
    parser.add_argument("--reach", type=float, default=1.0, help="out of reach past this")
    args = parser.parse_args()
    m, t = args.models, args.tasks
    n_pairs = m * (m - 1) // 2
    budget = int(args.share * n_pairs * t)
    k = max(1, int(args.share * n_pairs))
    results: dict[str, list[dict[str, float]]] = {"all": [], "random": [], "adaptive": []}
    used: dict[str, list[float]] = {"all": [], "random": [], "adaptive": []}
    rounds: list[int] = []
    start = time.perf_counter()
    for seed in range(args.fields):
        field = simulate_field(
            m, t, seed=seed, strength=strengths(m, args.scale),
            task_effect_sd=args.task_sd, tie_rate=args.tie_rate,
        )  # fmt: skip
        results["all"].append(score(field, fit(field.comparisons, args.resamples, seed)))
        used["all"].append(1.0)
        rows = random_design(m, t, k, seed)
        results["random"].append(score(field, fit(subset(field, rows), args.resamples, seed)))
        used["random"].append(len(rows) / (n_pairs * t))
        rows, ranking, n_rounds = adaptive(
            field, budget, args.resamples, seed, args.start, args.window, args.reach
        )
        results["adaptive"].append(score(field, ranking))
        used["adaptive"].append(len(rows) / (n_pairs * t))
        rounds.append(n_rounds)
    took = time.perf_counter() - start
    print(
        f"{args.fields} fields of {m} models x {t} tasks (MT-Bench strengths x {args.scale}, "
        f"task sd {args.task_sd}, ties {args.tie_rate}); {args.resamples} resamples; "
        f"budget {args.share:.0%} of all-pairs calls; {took:.0f} s"
    )
    print(f"{'design':10} {'calls':>6} {'neighbours':>11} {'claims':>7} {'wrong':>6} "
          f"{'cover diff':>11} {'cover nbr':>10}")  # fmt: skip
    for name, rows_ in results.items():
        mean = {key: np.mean([r[key] for r in rows_]) for key in rows_[0]}
        print(
            f"{name:10} {np.mean(used[name]):6.0%} {mean['neighbours']:8.1f}/{m - 1:<2} "
            f"{mean['claims']:7.1f} {mean['wrong']:6.0%} {mean['cover diff']:11.1%} "
            f"{mean['cover nbr']:10.1%}"
        )
    print(f"adaptive rounds after the start: median {int(np.median(rounds))}, "
          f"range {min(rounds)}-{max(rounds)}")  # fmt: skip


if __name__ == "__main__":
    main()
