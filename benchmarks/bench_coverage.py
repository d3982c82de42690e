"""Coverage of the 95% intervals of the expected win rate on simulated fields with known truth.

For each setting, many fields are drawn (5 models, strengths N(0, 1), every pair once per
task, optionally task-level random effects of the given sd per model and task); each is
bootstrapped by tasks and by judgments, and we count how often the interval of each model's
expected win rate against the field contains the truth (the Bradley-Terry fit to the expected
score matrix, which is what the estimator converges to). Columns:

  task pct     plain percentile task bootstrap
  task BCa     BCa (bias and acceleration, jackknife over tasks)
  task xBCa    expanded BCa, the default: BCa at the level whose normal quantile is
               sqrt(n/(n-1)) t_{n-1}, n = tasks (Hesterberg's correction for few clusters)
  judg pct     percentile judgment bootstrap (the naive one)
  judg xBCa    the default interval, resampling judgments
  false claims share of supported claims (task xBCa) whose ordering is wrong

Run: python benchmarks/bench_coverage.py [--fields 200] [--resamples 300]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from konkord.stats.bt import expected_win_rate
from konkord.stats.ranking import rank
from konkord.stats.resample import Bootstrap, bootstrap, bootstrap_interval
from konkord.stats.simfield import simulate_field

VARIANTS = {
    "task pct": ("task", "percentile", False),
    "task BCa": ("task", "bca", False),
    "task xBCa": ("task", "bca", True),
    "judg pct": ("judgments", "percentile", False),
    "judg xBCa": ("judgments", "bca", True),
}


def covered(boot: Bootstrap, method: str, expand: bool, truth: np.ndarray) -> np.ndarray:
    jack = boot.jackknife
    iv = bootstrap_interval(
        boot.point.expected_win_rate,
        boot.expected_win_rate,
        level=0.95,
        method="bca" if method == "bca" else "percentile",
        jackknife=None if jack is None else expected_win_rate(jack.log_strength),
        jackknife_weight=None if jack is None else jack.weight,
        n_units=boot.n_units if expand else None,
    )
    return (iv.lower <= truth) & (truth <= iv.upper)


def run_setting(
    n_tasks: int, sd: float, fields: int, resamples: int, models: int
) -> dict[str, float]:
    hits: dict[str, list[np.ndarray]] = {name: [] for name in VARIANTS}
    claims = wrong = 0
    for f in range(fields):
        field = simulate_field(models, n_tasks, seed=10_000 + f, task_effect_sd=sd)
        truth = field.target_expected_win_rate
        boots = {
            mode: bootstrap(field.comparisons, n_resamples=resamples, seed=f, mode=mode)
            for mode in ("task", "judgments")
        }
        for name, (mode, method, expand) in VARIANTS.items():
            hits[name].append(covered(boots[mode], method, expand, truth))
        for claim in rank(boots["task"]).claims:
            claims += 1
            target = field.target_log_strength
            wrong += bool(target[claim.upper] <= target[claim.lower])
    out = {name: 100.0 * float(np.mean(h)) for name, h in hits.items()}
    out["false claims"] = 100.0 * wrong / claims if claims else float("nan")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fields", type=int, default=200)
    parser.add_argument("--resamples", type=int, default=300)
    parser.add_argument("--models", type=int, default=5)
    args = parser.parse_args()
    print(
        f"coverage % of 95% intervals of expected win rate, {args.fields} fields x "
        f"{args.models} models, {args.resamples} resamples"
    )
    header = ["tasks", "effect sd", *VARIANTS, "false claims"]
    print("  ".join(f"{h:>12}" for h in header))
    start = time.perf_counter()
    for n_tasks in (14, 25, 100):
        for sd in (0.0, 2.0):
            row = run_setting(n_tasks, sd, args.fields, args.resamples, args.models)
            cells = [f"{n_tasks:>12}", f"{sd:>12.1f}"]
            cells += [f"{row[name]:>12.1f}" for name in [*VARIANTS, "false claims"]]
            print("  ".join(cells), flush=True)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
