"""Pair designs on simulated fields: what a quarter of the judge calls buys, and whether the
intervals stay honest when the design is sparse or chosen adaptively.

Each field: 20 models whose log-strengths are the published MT-Bench single-answer scores
(GPT-4 8.99, GPT-3.5 7.94, Claude-v1 7.90, Vicuna-13B 6.39, Alpaca-13B 4.53, LLaMA-13B 2.61)
interpolated to 20 models and scaled by --scale (0.5: GPT-4 beats LLaMA-13B about 95% of the
time), task effects of sd --task-sd per model and task, ties at --tie-rate; every pair is drawn
on every task once, and each design judges a subset of those same outcomes:

  all        every pair on every task (100% of the calls)
  random     K pairs per task, balanced and connected, K = --share of all pairs
  adaptive   a balanced start of --start of the budget, then rounds of --round of it spent
             where they most raise the expected neighbours separated
             (konkord.stats.design.next_round) after each fit; budget = --share of all calls

Every design is simulated at the level of the statistics, with the code the judge stage runs:
the same design functions, and every fit the report's (task bootstrap, expanded BCa; Wald
floors; the exact sign test, allowing for the opponents each model met: konkord.stats.gate).
Each interval is held to the value its estimator aims at under that design with endless tasks
(`design_target`). Columns per design, over the fields:

  calls used          share of all-pairs calls spent
  neighbours          correctly supported neighbouring orderings (of 19, true order), mean
  claims              supported orderings, mean
  wrong claim         fields with at least one wrong claim (target <= 5%)
  any claim           fields with any claim at all: with --scale 0 (every model equal) every
                      claim is wrong, and this is the chance of a wrong claim (target <= 5%)
  cover log-strength  coverage of each model's own log-strength (so rating) interval
  cover expected / raw win rate   each model's own win-rate intervals
  cover differences   all 190 pairwise difference intervals, and the 19 true neighbours'
                      (targets 93-97%)
A last line gives the neighbours whose difference interval excludes 0, before the sign test.

Run: python benchmarks/bench_design.py [--fields 400] [--resamples 300] [--designs all,random]
(400 fields: 5 to 20 min on 2 shared cores, with 300 or 1000 resamples, by load.)
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from konkord.stats.bt import Comparisons, comparisons, fit_bt_wins
from konkord.stats.design import all_pairs, next_round, random_design, start_pairs_per_task
from konkord.stats.gate import GatedRanking, gate
from konkord.stats.resample import Interval, bootstrap
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


def fit(comp: Comparisons, resamples: int, seed: int) -> GatedRanking:
    """The report's fit: task bootstrap (expanded BCa), floors and the sign test."""
    return gate(bootstrap(comp, n_resamples=resamples, seed=seed), comp)


def adaptive(
    field: SimulatedField,
    budget_pairs: int,
    resamples: int,
    seed: int,
    start: float,
    window: int,
    round_share: float,
) -> tuple[np.ndarray, GatedRanking, int]:
    m, t = field.comparisons.n_models, field.comparisons.n_tasks
    k0 = start_pairs_per_task(m, t, budget_pairs, start)
    rows = random_design(m, t, k0, seed)
    judged = np.zeros((t, m, m), dtype=bool)
    judged[rows[:, 0], rows[:, 1], rows[:, 2]] = True
    rounds = 0
    while True:
        gated = fit(subset(field, rows), resamples, seed)
        ranking = gated.ranking
        d = ranking.differences
        choice = next_round(
            ranking.order, ranking.supported, d, judged,
            pairs_left=budget_pairs - len(rows),
            round_pairs=max(1, math.ceil(round_share * budget_pairs)),
            seed=seed * 100_003 + rounds + 1,
            window=window,
            widen=1.0 if ranking.family is None else ranking.family.final_factor,
        )  # fmt: skip
        if choice.stop:
            return rows, gated, rounds
        rounds += 1
        rows = np.concatenate([rows, choice.design])
        judged[choice.design[:, 0], choice.design[:, 1], choice.design[:, 2]] = True


def design_target(field: SimulatedField, rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """What the estimator aims at under a design: the Bradley-Terry fit, with endless tasks,
    to the expected scores weighted by how often the design compares each pair. Ties and
    task effects make the field not quite Bradley-Terry, so a design that compares near
    pairs more aims at slightly wider gaps than all pairs do; each design is held to its own.
    Returns (log-strength, expected win rate, raw win rate)."""
    m = field.comparisons.n_models
    count = np.zeros((m, m))
    np.add.at(count, (rows[:, 1], rows[:, 2]), 1.0)
    count = count + count.T
    wins = count * field.expected_score
    target = fit_bt_wins(wins, prior=0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        raw = wins.sum(axis=1) / count.sum(axis=1)
    return target.log_strength, target.expected_win_rate, raw


def covered(interval: Interval, target: np.ndarray) -> np.ndarray:
    return (interval.lower <= target + 1e-12) & (target - 1e-12 <= interval.upper)


def score(field: SimulatedField, rows: np.ndarray, gated: GatedRanking) -> dict[str, float]:
    ranking = gated.ranking
    beta, ewr, raw = design_target(field, rows)
    m = beta.size
    true_order = np.argsort(-field.target_log_strength)
    sup = ranking.supported
    d = ranking.differences
    target = beta[:, None] - beta[None, :]
    inside = covered(Interval(d.lower, d.upper), target)
    a, b = np.triu_indices(m, k=1)
    upper, lower = true_order[:-1], true_order[1:]
    own = gated.intervals
    return {
        "neighbours": float(sup[upper, lower].sum()),
        "interval only": float((d.lower[upper, lower] > 0).sum()),
        "claims": float(sup.sum()),
        "wrong": float(bool((sup & (target < 0)).any())),
        "any": float(bool(sup.any())),
        "cover beta": float(covered(own["log_strength"], beta).mean()),
        "cover ewr": float(covered(own["expected_win_rate"], ewr).mean()),
        "cover raw": float(covered(own["raw_win_rate"], raw).mean()),
        "cover diff": float(inside[a, b].mean()),
        "cover nbr": float(inside[upper, lower].mean()),
    }


COLUMNS = (
    "neighbours",
    "interval only",
    "claims",
    "wrong",
    "any",
    "cover beta",
    "cover ewr",
    "cover raw",
    "cover diff",
    "cover nbr",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fields", type=int, default=400)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--resamples", type=int, default=300)
    parser.add_argument("--share", type=float, default=0.25)
    parser.add_argument("--scale", type=float, default=0.5)
    parser.add_argument("--task-sd", type=float, default=0.5)
    parser.add_argument("--tie-rate", type=float, default=0.1)
    parser.add_argument("--start", type=float, default=0.7, help="the adaptive start's share")
    parser.add_argument("--window", type=int, default=2, help="ranks apart a pair may be")
    parser.add_argument("--round", type=float, default=0.1, help="each later round's share")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--designs", default="all,random,adaptive", help="which to run")
    args = parser.parse_args()
    m, t = args.models, args.tasks
    n_pairs = m * (m - 1) // 2
    budget = int(args.share * n_pairs * t)
    k = max(1, int(args.share * n_pairs))
    designs = tuple(args.designs.split(","))
    results: dict[str, list[dict[str, float]]] = {name: [] for name in designs}
    used: dict[str, list[float]] = {name: [] for name in designs}
    rounds: list[int] = []
    start = time.perf_counter()
    every = all_pairs(m, t)
    for number, seed in enumerate(range(args.first_seed, args.first_seed + args.fields), 1):
        field = simulate_field(
            m, t, seed=seed, strength=strengths(m, args.scale),
            task_effect_sd=args.task_sd, tie_rate=args.tie_rate,
        )  # fmt: skip
        for name in designs:
            if name == "all":
                rows, gated = every, fit(field.comparisons, args.resamples, seed)
            elif name == "random":
                rows = random_design(m, t, k, seed)
                gated = fit(subset(field, rows), args.resamples, seed)
            else:
                rows, gated, n_rounds = adaptive(
                    field, budget, args.resamples, seed, args.start, args.window, args.round
                )
                rounds.append(n_rounds)
            results[name].append(score(field, rows, gated))
            used[name].append(len(rows) / (n_pairs * t))
        if number % 25 == 0:
            print(f"  {number} fields, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    took = time.perf_counter() - start
    print(
        f"{args.fields} fields of {m} models x {t} tasks (MT-Bench strengths x {args.scale}, "
        f"task sd {args.task_sd}, ties {args.tie_rate}); {args.resamples} resamples; "
        f"budget {args.share:.0%} of all-pairs calls; {took:.0f} s"
    )
    print("| design | calls used | neighbours separated (of "
          f"{m - 1}) | claims | fields with a wrong claim | fields with any claim | "
          "cover log-strength | "
          "cover expected win rate | cover raw win rate | cover differences (all pairs) | "
          "cover differences (neighbours) |")  # fmt: skip
    print("|---" * 11 + "|")
    for name, rows_ in results.items():
        mean = {key: float(np.mean([r[key] for r in rows_])) for key in COLUMNS}
        print(
            f"| {name} | {np.mean(used[name]):.1%} | {mean['neighbours']:.2f} | "
            f"{mean['claims']:.1f} | {mean['wrong']:.1%} | {mean['any']:.1%} | "
            f"{mean['cover beta']:.1%} | "
            f"{mean['cover ewr']:.1%} | {mean['cover raw']:.1%} | {mean['cover diff']:.1%} | "
            f"{mean['cover nbr']:.1%} |"
        )
    print(
        "neighbours whose interval excludes 0 (sign test aside): "
        + ", ".join(
            f"{name} {np.mean([r['interval only'] for r in rows_]):.2f}"
            for name, rows_ in results.items()
        )
    )
    if "adaptive" in results and "random" in results:
        paired = np.array(
            [
                a["neighbours"] - r["neighbours"]
                for a, r in zip(results["adaptive"], results["random"], strict=True)
            ]
        )
        print(f"adaptive - random, neighbours separated, paired over fields: {paired.mean():+.2f} "
              f"(standard error {paired.std(ddof=1) / np.sqrt(paired.size):.2f})")  # fmt: skip
    if rounds:
        print(f"adaptive rounds after the start: median {int(np.median(rounds))}, "
              f"range {min(rounds)}-{max(rounds)}")  # fmt: skip


if __name__ == "__main__":
    main()
