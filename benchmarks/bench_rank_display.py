"""Does the rank column agree with the claims? Chained rank groups against rank ranges.

Over many simulated fields (4-8 models, 8-30 tasks, task effects 0-2), each display is checked
against the supported orderings of the same ranking:

  implied   the display orders two models (chained: different groups; ranges: a's worst rank
            above b's best) although their ordering is not supported
  hidden    an ordering is supported but the display does not show it (chained: both in one
            group; ranges: a's range not above b's at both ends)

Chained groups are rebuilt here as wave 1 made them (neighbours chained while their difference
interval contains 0), judged against the interval-only rule they were made with; rank ranges
are judged against the rule the report uses now (interval and sign test over tasks), and
also against the interval-only rule, so both displays meet the same relation once.

Run: python benchmarks/bench_rank_display.py [--fields 400] [--resamples 200]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import numpy.typing as npt

from konkord.stats.ranking import rank, rank_ranges
from konkord.stats.resample import bootstrap
from konkord.stats.simfield import simulate_field

Bools = npt.NDArray[np.bool_]


def chained_groups(order: list[int], separated: Bools) -> dict[int, int]:
    """Wave 1's rank groups: a new group wherever a model is separated from the one above."""
    group: dict[int, int] = {}
    number = 0
    for pos, model in enumerate(order):
        if pos == 0 or separated[order[pos - 1], model]:
            number += 1
        group[model] = number
    return group


def chained_contradictions(order: list[int], supported: Bools) -> tuple[int, int]:
    group = chained_groups(order, supported | supported.T)
    implied = hidden = 0
    for pos, a in enumerate(order):
        for b in order[pos + 1 :]:
            if group[a] < group[b] and not supported[a, b]:
                implied += 1
            if group[a] == group[b] and supported[a, b]:
                hidden += 1
    return implied, hidden


def range_contradictions(supported: Bools) -> tuple[int, int]:
    m = supported.shape[0]
    best, worst = rank_ranges(supported, np.ones(m, dtype=bool))
    implied = hidden = 0
    for a in range(m):
        for b in range(m):
            if a == b:
                continue
            if worst[a] < best[b] and not supported[a, b]:
                implied += 1
            if supported[a, b] and not (best[a] < best[b] and worst[a] < worst[b]):
                hidden += 1
    return implied, hidden


def field_checks(seed: int, resamples: int) -> dict[str, tuple[int, int]]:
    rng = np.random.default_rng(seed)
    models = int(rng.integers(4, 9))
    tasks = int(rng.integers(8, 31))
    sd = float(rng.choice([0.0, 1.0, 2.0]))
    field = simulate_field(models, tasks, seed=rng, task_effect_sd=sd, tie_rate=0.1)
    boot = bootstrap(field.comparisons, n_resamples=resamples, seed=seed)
    interval_only = rank(boot)
    full = rank(boot, field.comparisons)
    return {
        "chained, interval rule": chained_contradictions(
            interval_only.order.tolist(), interval_only.supported
        ),
        "ranges, interval rule": range_contradictions(interval_only.supported),
        "ranges, report rule": range_contradictions(full.supported),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fields", type=int, default=400)
    parser.add_argument("--resamples", type=int, default=200)
    args = parser.parse_args()
    start = time.perf_counter()
    fields: dict[str, list[int]] = {}
    pairs: dict[str, list[int]] = {}
    for seed in range(args.fields):
        for name, (implied, hidden) in field_checks(seed, args.resamples).items():
            f = fields.setdefault(name, [0, 0])
            p = pairs.setdefault(name, [0, 0])
            f[0] += implied > 0
            f[1] += hidden > 0
            p[0] += implied
            p[1] += hidden
    print(f"{args.fields} simulated fields, {args.resamples} resamples each")
    print(f"{'display':<24} {'fields implying':>16} {'fields hiding':>14} {'pairs':>12}")
    for name in fields:
        print(
            f"{name:<24} {fields[name][0]:>16} {fields[name][1]:>14} "
            f"{pairs[name][0]:>5} / {pairs[name][1]:<5}"
        )
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
