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
  shown        what the site prints: task xBCa never narrower than the Wilson interval of
               the model's raw score (stats.floors)
  false claims share of supported claims (interval and sign test) whose ordering is wrong

Then the agreement interval (judge vs people) on simulated labels: per field, T tasks of k
comparisons each; the judge's accuracy varies by task (logit-normal task effects of the given
sd around 70%), so comparisons of one task are correlated. The truth is the mean accuracy over
the task population. Columns: plain Wilson (every comparison independent) and the task-clustered
Wilson on the effective sample size (stats.agreement.clustered_proportion).

Run: python benchmarks/bench_coverage.py [--fields 200] [--resamples 300] [--tasks 25]
     python benchmarks/bench_coverage.py --agreement-only
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from konkord.stats.agreement import clustered_proportion
from konkord.stats.bt import expected_win_rate
from konkord.stats.floors import floored_intervals
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
    hits: dict[str, list[np.ndarray]] = {name: [] for name in [*VARIANTS, "shown"]}
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
        shown = floored_intervals(boots["task"], field.comparisons)["expected_win_rate"]
        hits["shown"].append((shown.lower <= truth) & (truth <= shown.upper))
        for claim in rank(boots["task"], field.comparisons).claims:
            claims += 1
            target = field.target_log_strength
            wrong += bool(target[claim.upper] <= target[claim.lower])
    out = {name: 100.0 * float(np.mean(h)) for name, h in hits.items()}
    out["false claims"] = 100.0 * wrong / claims if claims else float("nan")
    return out


def agreement_coverage(
    n_tasks: int, per_task: int, sd: float, fields: int, base: float = 0.7
) -> tuple[float, float]:
    """Coverage % of (plain Wilson, task-clustered) agreement intervals over simulated fields."""
    rng = np.random.default_rng(7)
    logit = np.log(base / (1.0 - base))
    population = 1.0 / (1.0 + np.exp(-(logit + sd * rng.standard_normal(2_000_000))))
    truth = float(population.mean())
    plain = clustered = 0
    tasks = np.repeat(np.arange(n_tasks), per_task)
    for _ in range(fields):
        accuracy = 1.0 / (1.0 + np.exp(-(logit + sd * rng.standard_normal(n_tasks))))
        hits = rng.random(tasks.size) < accuracy[tasks]
        got = clustered_proportion(hits, tasks)
        plain += got.plain_low <= truth <= got.plain_high
        clustered += got.low <= truth <= got.high
    return 100.0 * plain / fields, 100.0 * clustered / fields


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fields", type=int, default=200)
    parser.add_argument("--resamples", type=int, default=300)
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--tasks", type=int, nargs="*", default=[14, 25, 100])
    parser.add_argument("--agreement-only", action="store_true")
    args = parser.parse_args()
    start = time.perf_counter()
    if not args.agreement_only:
        print(
            f"coverage % of 95% intervals of expected win rate, {args.fields} fields x "
            f"{args.models} models, {args.resamples} resamples"
        )
        header = ["tasks", "effect sd", *VARIANTS, "shown", "false claims"]
        print("  ".join(f"{h:>12}" for h in header))
        for n_tasks in args.tasks:
            for sd in (0.0, 2.0):
                row = run_setting(n_tasks, sd, args.fields, args.resamples, args.models)
                cells = [f"{n_tasks:>12}", f"{sd:>12.1f}"]
                cells += [f"{row[name]:>12.1f}" for name in [*VARIANTS, "shown", "false claims"]]
                print("  ".join(cells), flush=True)
    fields = max(args.fields, 2000)
    print(f"\ncoverage % of 95% agreement intervals, {fields} simulated label sets, accuracy 70%")
    print("  ".join(f"{h:>14}" for h in ("tasks", "per task", "task sd", "plain Wilson", "clustered")))
    for n_tasks, per_task in ((25, 4), (25, 20), (80, 20)):
        for sd in (0.0, 1.0):
            plain, clustered = agreement_coverage(n_tasks, per_task, sd, fields)
            cells = (n_tasks, per_task, f"{sd:.1f}", f"{plain:.1f}", f"{clustered:.1f}")
            print("  ".join(f"{c:>14}" for c in cells), flush=True)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
