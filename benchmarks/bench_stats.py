"""Speed and memory of the statistics engine, end to end from pair outcomes to rank groups.

Prints, in one run:
- 20 models x 1,000 tasks (190,000 pair outcomes), 1,000 task-bootstrap resamples, beside
  the same work done the slow ways, timed on a few resamples and scaled to 1,000: a plain
  loop refitting with choix.ilsr_pairwise per resample, and a loop of MM fits (Hunter 2004)
  on counts re-aggregated per resample;
- the style-controlled fit on the same field with five style covariates (normalised
  differences of answer features), 1,000 resamples and its jackknife (every task left out,
  refitted), beside the plain fit's time measured in the same run (aim: under 2 s), and
  beside its rival: a loop refitting the
  style-controlled model on each resample's task counts by the point fit's Newton method
  (timed on a few, scaled to 1,000);
- a scaling table up to 40 models x 5,000 tasks (3.9 million pair outcomes; aim: under 2 s
  and 300 MB) and 150 models x 500 tasks (Arena's number of models; aim: under 5 s). Each
  size runs in its own process (`--repeats` times: median and range), which loads the pair
  outcomes from disk, so its peak memory (VmHWM) is the interpreter, the inputs and the
  engine's own working memory, and nothing of the simulation that made them. Beside each
  row, its anchor: the MM loop timed on a few resamples of the same data in the same run.

- `rank()` alone on the 20 x 1,000 field's bootstrap, with and without the comparisons (with
  them: Wald floors, sign tests and the family-wise step-down of every claim), wall and CPU.

Run: python benchmarks/bench_stats.py [--choix-resamples 2] [--mm-resamples 20] [--repeats 3]
     [--style-only] (the plain and style-controlled lines alone) [--rank-only]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import choix
import numpy as np

from konkord.stats.bt import comparisons, win_matrix
from konkord.stats.ranking import rank
from konkord.stats.resample import bootstrap, task_weights
from konkord.stats.simfield import simulate_field
from konkord.stats.style_boot import style_bootstrap
from konkord.stats.style_features import normalised_difference
from konkord.stats.style_fit import StyleData, fit_style_bt, style_data


def end_to_end(arrays: tuple[np.ndarray, ...], n_models: int, n_tasks: int) -> dict[str, float]:
    """Pair outcomes -> fit, 1,000 resamples, all intervals, pairwise differences, groups."""
    marks = {"start": time.perf_counter()}
    comp = comparisons(*arrays, n_models, n_tasks)
    boot = bootstrap(comp, n_resamples=1000, seed=0)
    marks["bootstrap"] = time.perf_counter()
    boot.intervals()
    marks["intervals"] = time.perf_counter()
    rank(boot)
    marks["ranking"] = time.perf_counter()
    assert boot.n_converged == boot.n_fits, "some fits did not converge"
    return {
        "bootstrap": marks["bootstrap"] - marks["start"],
        "intervals": marks["intervals"] - marks["bootstrap"],
        "ranking": marks["ranking"] - marks["intervals"],
        "total": marks["ranking"] - marks["start"],
        "iterations": boot.iterations_max,
    }


def rank_lines(arrays: tuple[np.ndarray, ...], repeats: int) -> None:
    """`rank()` on one bootstrap of 20 models x 1,000 tasks x 1,000 resamples: median [range]
    of wall and CPU seconds over `repeats`, without and with the comparisons."""
    comp = comparisons(*arrays, 20, 1000)
    boot = bootstrap(comp, n_resamples=1000, seed=0)
    for label, work in (
        ("rank(boot)", lambda: rank(boot)),
        ("rank(boot, comparisons)", lambda: rank(boot, comp)),
    ):
        wall, cpu = [], []
        for _ in range(repeats):
            start, start_cpu = time.perf_counter(), time.process_time()
            work()
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        print(
            f"  {label}, 20 models x 1000 tasks x 1000 resamples: wall "
            f"{statistics.median(wall):.3f} s [{min(wall):.3f}-{max(wall):.3f}], CPU "
            f"{statistics.median(cpu):.3f} s [{min(cpu):.3f}-{max(cpu):.3f}] ({repeats} repeats)"
        )


def style_field(arrays: tuple[np.ndarray, ...], n_models: int, n_tasks: int) -> StyleData:
    """The field with five style covariates: answer features drawn per (task, model) the way
    answers vary (length log-normal, formatting counts Poisson), as normalised differences."""
    rng = np.random.default_rng(5)
    counts = np.stack(
        [
            np.rint(200 * np.exp(rng.normal(0, 0.5, (n_tasks, n_models)))),
            rng.poisson(1.0, (n_tasks, n_models)),
            rng.poisson(3.0, (n_tasks, n_models)),
            rng.poisson(2.0, (n_tasks, n_models)),
            rng.poisson(0.5, (n_tasks, n_models)),
        ],
        axis=2,
    ).astype(np.float64)
    task, i, j, _ = arrays
    x = normalised_difference(counts[task, i], counts[task, j])
    return style_data(comparisons(*arrays, n_models, n_tasks), x)


def style_end_to_end(data: StyleData) -> dict[str, float]:
    """Fit, 1,000 resamples, jackknife, intervals, differences and groups."""
    start = time.perf_counter()
    boot = style_bootstrap(data, n_resamples=1000, seed=0)
    boot.bootstrap.intervals()
    boot.coefficient_intervals()
    rank(boot.bootstrap, data.comp)
    assert boot.bootstrap.n_converged == boot.bootstrap.n_fits, "some fits did not converge"
    return {"total": time.perf_counter() - start, "iterations": boot.iterations_max}


def style_refit_loop(data: StyleData, n: int) -> float:
    """Seconds per resample: the point fit's own Newton method on each resample's task
    counts (one full fit per resample, started from the point estimate)."""
    point = fit_style_bt(data)
    init = np.concatenate([point.fit.log_strength, point.coefficients])
    weights = task_weights(data.comp.n_tasks, n, seed=0).astype(np.float64)
    start = time.perf_counter()
    for k in range(n):
        fit_style_bt(data, weights=weights[k], init=init)
    return (time.perf_counter() - start) / n


def style_lines(arrays: tuple[np.ndarray, ...], plain: dict[str, float], repeats: int,
                refits: int) -> None:
    data = style_field(arrays, 20, 1000)
    ours = timed(repeats, lambda: style_end_to_end(data))
    per = style_refit_loop(data, refits)
    print(
        f"  style-controlled, 5 covariates, same field: {ours['total']:.3f} s "
        f"[{ours['low']:.3f}-{ours['high']:.3f}] end to end (median of {repeats}; at most "
        f"{ours['iterations']:.0f} steps per resample), {ours['total'] / plain['total']:.1f}x "
        f"the plain fit's {plain['total']:.3f} s; aim < 2 s; CPU time {ours['cpu']:.3f} s, "
        f"{ours['cpu'] / plain['cpu']:.1f}x the plain fit's {plain['cpu']:.3f} s (all threads)"
    )
    print(
        f"    its rival, a Newton refit per resample from the point estimate: "
        f"{per:.3f} s per resample (timed on {refits}), {1000 * per:.0f} s for 1000; "
        f"speed-up {1000 * per / ours['total']:.0f}x"
    )


def timed(repeats: int, work: Callable[[], dict[str, float]]) -> dict[str, float]:
    """Median of each figure over `repeats` runs (the machine is shared), and the range of the
    total as `low` and `high`."""
    runs = []
    for _ in range(repeats):
        cpu = time.process_time()
        run = work()
        runs.append({**run, "cpu": time.process_time() - cpu})
    median = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    totals = [r["total"] for r in runs]
    return {**median, "low": min(totals), "high": max(totals)}


def resampled_rows(task: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Row indices of the comparisons in one task resample (tasks repeated by weight)."""
    order = np.argsort(task, kind="stable")
    starts = np.searchsorted(task[order], np.arange(weights.size + 1))
    return np.concatenate(
        [np.tile(order[starts[t] : starts[t + 1]], w) for t, w in enumerate(weights) if w]
    )


def choix_loop(arrays: tuple[np.ndarray, ...], n_models: int, n_tasks: int, n: int) -> float:
    """Seconds per resample: rebuild the (winner, loser) list and refit with ilsr_pairwise."""
    task, i, j, score = arrays
    weights = task_weights(n_tasks, n, seed=0)
    start = time.perf_counter()
    for k in range(n):
        rows = resampled_rows(task, weights[k])
        data = []
        for a, b, s in zip(i[rows].tolist(), j[rows].tolist(), score[rows].tolist(), strict=True):
            if s == 1.0:
                data.append((a, b))
            elif s == 0.0:
                data.append((b, a))
            else:  # a tie: one win each way, the closest ilsr_pairwise gets to half a win
                data.extend([(a, b), (b, a)])
        choix.ilsr_pairwise(n_models, data, alpha=0.01)
    return (time.perf_counter() - start) / n


def mm_fit(wins: np.ndarray, tol: float = 1e-9, max_iter: int = 100_000) -> np.ndarray:
    """Hunter's MM for Bradley-Terry with the same weak prior (half a win, half a loss)."""
    m = wins.shape[0]
    counts = wins + wins.T
    total = wins.sum(axis=1) + 0.5
    strength = np.ones(m)
    for _ in range(max_iter):
        denom = (counts / (strength[:, None] + strength[None, :])).sum(axis=1)
        denom += 1.0 / (strength + 1.0)  # one virtual comparison against strength 1
        new = total / denom
        new /= np.exp(np.log(new).mean())
        if np.abs(np.log(new) - np.log(strength)).max() < tol:
            return np.log(new)
        strength = new
    return np.log(strength)


def mm_loop(arrays: tuple[np.ndarray, ...], n_models: int, n_tasks: int, n: int) -> float:
    """Seconds per resample: re-aggregate counts from the resampled rows, then MM to 1e-9."""
    task, i, j, score = arrays
    weights = task_weights(n_tasks, n, seed=0)
    start = time.perf_counter()
    for k in range(n):
        rows = resampled_rows(task, weights[k])
        comp = comparisons(np.zeros(rows.size), i[rows], j[rows], score[rows], n_models, 1)
        mm_fit(win_matrix(comp))
    return (time.perf_counter() - start) / n


def field_arrays(n_models: int, n_tasks: int) -> tuple[np.ndarray, ...]:
    comp = simulate_field(n_models, n_tasks, seed=0, task_effect_sd=1.0, tie_rate=0.1).comparisons
    return comp.task, comp.i, comp.j, comp.score


# One size end to end in a fresh process; prints its figures as JSON.
CHILD = """
import json, sys, time
import numpy as np
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024
from konkord.stats.bt import comparisons
from konkord.stats.ranking import rank
from konkord.stats.resample import bootstrap
n_models, n_tasks = int(sys.argv[2]), int(sys.argv[3])
with np.load(sys.argv[1]) as data:
    arrays = data["task"], data["i"], data["j"], data["score"]
inputs = sum(a.nbytes for a in arrays) / 2**20
before = status("VmRSS:")
started, cpu_started = time.perf_counter(), time.process_time()
boot = bootstrap(comparisons(*arrays, n_models, n_tasks), n_resamples=1000, seed=0)
boot.intervals()
rank(boot)
seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
assert boot.n_converged == boot.n_fits, "some fits did not converge"
print(json.dumps({"seconds": seconds, "cpu": cpu, "peak_mib": status("VmHWM:"), "before_mib": before,
                  "inputs_mib": inputs}))
"""

SIZES = ((20, 1000), (40, 1000), (40, 5000), (80, 500), (100, 200), (150, 500))
AIMS = {(40, 5000): "aim < 2 s, < 300 MiB", (150, 500): "aim < 5 s"}


def in_process(path: Path, n_models: int, n_tasks: int) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(n_models), str(n_tasks)],
        capture_output=True,
        text=True,
        check=True,
    )
    figures: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return figures


def scaling_table(repeats: int, mm_resamples: int) -> None:
    """Each size in `repeats` fresh processes: median [range] time, peak memory, MM anchor."""
    print(
        f"{'models x tasks':>15} {'outcomes':>10} {'seconds, median [range]':>25} {'CPU s':>6} "
        f"{'peak MiB (at start; inputs)':>28} {'MM loop, 1000':>14} {'speed-up':>9}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n_models, n_tasks in SIZES:
            arrays = field_arrays(n_models, n_tasks)
            path = Path(tmp) / f"field-{n_models}-{n_tasks}.npz"
            np.savez(path, task=arrays[0], i=arrays[1], j=arrays[2], score=arrays[3])
            runs = [in_process(path, n_models, n_tasks) for _ in range(repeats)]
            seconds = [r["seconds"] for r in runs]
            median = statistics.median(seconds)
            peak = statistics.median(r["peak_mib"] for r in runs)
            cpu = statistics.median(r["cpu"] for r in runs)
            per_mm = mm_loop(arrays, n_models, n_tasks, mm_resamples)
            aim = AIMS.get((n_models, n_tasks), "")
            print(
                f"{n_models:>6} x {n_tasks:<6} {arrays[0].size:>10,} "
                f"{median:>9.2f} [{min(seconds):.2f}-{max(seconds):.2f}]{'':>5} {cpu:>6.2f} "
                f"{peak:>12.0f} ({runs[0]['before_mib']:>4.0f}; {runs[0]['inputs_mib']:>4.0f}) "
                f"{1000 * per_mm:>12.0f} s {1000 * per_mm / median:>8.0f}x  {aim}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--choix-resamples", type=int, default=2)
    parser.add_argument("--mm-resamples", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale-mm-resamples", type=int, default=2)
    parser.add_argument("--style-refits", type=int, default=10)
    parser.add_argument("--style-only", action="store_true")
    parser.add_argument("--rank-only", action="store_true", help="the rank() lines alone")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}")
    if args.rank_only:
        rank_lines(field_arrays(20, 1000), args.repeats)
        return

    arrays = field_arrays(20, 1000)
    ours = timed(args.repeats, lambda: end_to_end(arrays, 20, 1000))
    print(
        f"20 models x 1000 tasks ({arrays[0].size:,} pair outcomes), 1000 task resamples "
        f"+ BCa jackknife: {ours['total']:.3f} s [{ours['low']:.3f}-{ours['high']:.3f}] end to "
        f"end (median of {args.repeats}; bootstrap {ours['bootstrap']:.3f}, "
        f"intervals {ours['intervals']:.3f}, differences and groups {ours['ranking']:.3f}; "
        f"at most {ours['iterations']:.0f} Newton iterations)"
    )
    style_lines(arrays, ours, args.repeats, args.style_refits)
    if args.style_only:
        return
    per_choix = choix_loop(arrays, 20, 1000, args.choix_resamples)
    per_mm = mm_loop(arrays, 20, 1000, args.mm_resamples)
    for name, per, n in (
        ("choix.ilsr_pairwise loop", per_choix, args.choix_resamples),
        ("MM loop on re-aggregated counts", per_mm, args.mm_resamples),
    ):
        print(
            f"  {name}: {per:.3f} s per resample (timed on {n}), {1000 * per:.1f} s for 1000; "
            f"speed-up {1000 * per / ours['total']:.0f}x"
        )

    print(
        f"\nScaling, 1000 task resamples + BCa jackknife + differences and groups, each in a "
        f"fresh process ({args.repeats} repeats); MM loop timed on {args.scale_mm_resamples} "
        "resamples per size (no jackknife):"
    )
    scaling_table(args.repeats, args.scale_mm_resamples)


if __name__ == "__main__":
    main()
