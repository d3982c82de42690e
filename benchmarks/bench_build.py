"""Benchmark `konkord build`: 10 runs x 200 tasks x 8 models, full build and no-change rebuild.

Prints the full build time (aim: under 10 s), the no-change rebuild time (aim: under 1 s) and
peak memory (VmHWM of the build's main process; a worker renders one run at a time, so its
peak is close to the 1-worker figure: 89 MiB against 94 when last sampled). Each build runs in
its own process, as a user runs it. The full build is measured with 1 worker (in process: its
CPU time is what one free core would take) and with 2 workers (wall time, which depends on
free cores), each into a fresh output folder so that both meet the same file system; with
--repeat N, each is built N times and the median is shown with the range.

    python benchmarks/bench_build.py [--runs 10] [--tasks 200] [--models 8] [--judges 1]
                                     [--repeat 1]
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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from fixtures_site import make_results, write_project  # noqa: E402

BUILD = """
import json, sys, time
from pathlib import Path
def peak_mib():
    # VmHWM starts afresh at exec; ru_maxrss would carry over the benchmark's own peak.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")
started = time.perf_counter()
cpu_started = time.process_time()
from konkord.stages.build import build_site
summary = build_site(Path(sys.argv[1]), offline=True, runs_file=Path("runs.json"))
elapsed = time.perf_counter() - started
print(json.dumps({"seconds": elapsed, "cpu": time.process_time() - cpu_started,
                  "peak_mib": peak_mib(),
                  "written": len(summary.written), "unchanged": summary.unchanged}))
"""


def run_build(root: Path, out: str = "public", workers: int | None = None) -> dict[str, float]:
    env = dict(os.environ)
    if workers is not None:
        env["KONKORD_BUILD_WORKERS"] = str(workers)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", BUILD, out],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    figures: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    figures["wall"] = time.perf_counter() - started
    return figures


def full_builds(root: Path, workers: int, repeat: int) -> dict[str, float]:
    """`repeat` full builds with `workers`, each into a fresh folder; the median figures, and
    the range of build times as `low` and `high`."""
    runs = [run_build(root, f"public-{workers}w-{n}", workers) for n in range(repeat)]
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    seconds = [run["seconds"] for run in runs]
    return {**median, "low": min(seconds), "high": max(seconds)}


def spread(figures: dict[str, float]) -> str:
    if figures["low"] == figures["high"]:
        return ""
    return f" [{figures['low']:.2f} to {figures['high']:.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--models", type=int, default=8)
    parser.add_argument("--judges", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1, help="full builds per worker count")
    args = parser.parse_args()
    models = [f"provider/model-{i}" for i in range(args.models)]
    judges = [f"judge/j-{i}" for i in range(args.judges)]
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = [
            make_results(
                f"run-{k:02d}",
                models=models,
                judges=judges,
                n_tasks=args.tasks,
                answer_words=150,
                rationale_words=40,
                seed=k,
            )
            for k in range(args.runs)
        ]
        write_project(root, runs)
        size = sum(p.stat().st_size for p in (root / "results").glob("*.json"))
        print(
            f"{args.runs} runs x {args.tasks} tasks x {args.models} models, {args.judges} judge(s); "
            f"results files {size / 1e6:.1f} MB; {os.cpu_count()} CPUs, load average {load:.1f}"
        )
        one = full_builds(root, 1, args.repeat)
        pages = sum(1 for _ in (root / "public-1w-0").rglob("*.html"))
        print(
            f"full build, 1 worker:   {one['seconds']:.2f} s{spread(one)} ({one['cpu']:.2f} s CPU), "
            f"{int(one['written'])} files ({pages} pages), peak memory {one['peak_mib']:.0f} MiB"
        )
        two = full_builds(root, 2, args.repeat)
        print(
            f"full build, 2 workers:  {two['seconds']:.2f} s{spread(two)} in the build "
            f"({two['wall']:.2f} s with interpreter start), {int(two['written'])} files, "
            f"peak memory {two['peak_mib']:.0f} MiB (main process)"
        )
        # The no-change rebuild and the template edit start from a complete build.
        (root / "public-2w-0").rename(root / "public")
        again = run_build(root)
        print(
            f"no-change rebuild:      {again['seconds']:.2f} s ({again['cpu']:.2f} s CPU, "
            f"{again['wall']:.2f} s with interpreter start), {int(again['written'])} files "
            f"written, peak memory {again['peak_mib']:.0f} MiB"
        )
        template = root / "templates" / "leaderboard.html"
        template.write_text(template.read_text().replace("What the data supports", "Supported"))
        edit = run_build(root)
        print(
            f"one template edited:    {edit['seconds']:.2f} s, {int(edit['written'])} files written"
        )


if __name__ == "__main__":
    main()
