"""Benchmark `konkord build` as people run it: whole processes on runs with evidence logs.

The project: 10 runs x 200 tasks x 8 models with one judge (defaults). Run 1's evidence is made
for real, untimed, by `konkord build` with the sim provider (answers, both orders of every pair,
the results file computed from them); the other runs are copies of it under their own names,
so every run has an evidence log and every build checks each run's stages (answers, verdicts,
labels, checks, results digest) before rendering, as it does for a real project.

Each figure is the whole `konkord build` process, interpreter start included, measured with
--repeat runs (median [range]), beside its anchors measured in the same session: the start of
`python -c pass` and of `konkord --help`. Peak memory is VmHWM of the build's main process and
the largest peak of its render workers (ru_maxrss of its children).

- full build, 1 worker and 2 workers, each into a fresh folder (aim: under 10 s);
- no-change rebuild, as a user runs it again (aim: under 0.5 s);
- the same without the build stamp, so every stage check and every page hash runs;
- one template edited;
- `konkord report --run run-00` with everything up to date (aim: under 0.5 s);
- the shipped demo as a user has it after one build: a no-change `konkord build` and an
  up-to-date `konkord report --run demo-python-codegen` (aim: under 0.5 s each).

    python benchmarks/bench_build.py [--runs 10] [--tasks 200] [--models 8] [--repeat 3]
    python benchmarks/bench_build.py --demo-only    # only the shipped demo's two commands
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent

# `konkord build` exactly as the console script runs it, then the peaks on stderr's last line.
BUILD = """
import json, resource, sys
def peaks():
    hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    cpu = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF,
              resource.RUSAGE_CHILDREN) for f in ("ru_utime", "ru_stime"))
    sys.stderr.write("\\n" + json.dumps({"main_mib": hwm / 1024, "workers_mib": workers / 1024,
                                        "cpu_s": cpu}))
from konkord.cli import main
sys.argv = ["konkord", *sys.argv[1:]]
import atexit
atexit.register(peaks)  # the exit hooks run on every way out, a fast exit included
main()
"""


def konkord(root: Path, *args: str, workers: int | None = None) -> dict[str, float | str]:
    """One whole `konkord` process in `root`: wall seconds, peaks, its last line of output."""
    env = dict(os.environ)
    if workers is not None:
        env["KONKORD_BUILD_WORKERS"] = str(workers)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", BUILD, *args], cwd=root, capture_output=True, text=True, env=env
    )
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"konkord {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    peaks = json.loads(result.stderr.strip().splitlines()[-1])
    lines = result.stdout.strip().splitlines()
    return {"wall": wall, **peaks, "line": lines[-1] if lines else ""}


def start_time(command: list[str], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return times


def start_cpu(command: list[str]) -> float:
    """CPU seconds (user + system) of one process: on a shared machine, steadier than wall."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def make_project(root: Path, n_runs: int, n_tasks: int, n_models: int) -> None:
    """Run 1 made for real with the sim provider (untimed), the others copied under new names."""
    for folder in ("templates", "content"):
        shutil.copytree(REPO / folder, root / folder)
    tasks = [
        {"id": f"task-{k:03d}", "prompt": f"Explain item {k} of the list in a few sentences."}
        for k in range(n_tasks)
    ]
    suite = {"name": "bench", "rubric": "Prefer the correct, complete answer.", "tasks": tasks}
    (root / "suites").mkdir()
    (root / "suites" / "bench.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    models = [
        f"sim/m{i}:strength={1.5 - 3.0 * i / max(1, n_models - 1):.2f}" for i in range(n_models)
    ]
    entry = {"suite": "suites/bench.yaml", "models": models, "judges": ["sim-judge/referee"]}
    names = [f"run-{k:02d}" for k in range(n_runs)]
    runs_file = root / "runs.json"
    runs_file.write_text(json.dumps({"runs": [{"name": names[0], **entry}]}, indent=1))
    konkord(root, "build")
    first = json.loads((root / "results" / f"{names[0]}.json").read_text())
    for name in names[1:]:
        shutil.copytree(root / "runs" / names[0], root / "runs" / name)
        (root / "results" / f"{name}.json").write_text(json.dumps({**first, "run": name}, indent=1))
    runs_file.write_text(json.dumps({"runs": [{"name": n, **entry} for n in names]}, indent=1))
    shutil.rmtree(root / "public")
    shutil.rmtree(root / ".konkord", ignore_errors=True)


def demo_figures(repeat: int, helptext: list[float]) -> None:
    """The shipped demo copied as it is committed, built once (untimed), then the two commands
    a user runs most, as whole processes."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for folder in ("templates", "content", "suites", "runs", "results"):
            shutil.copytree(REPO / folder, root / folder)
        shutil.copy(REPO / "runs.json", root / "runs.json")
        konkord(root, "build")  # the build a user made last, with its stamp
        konkord(root, "report", "--run", "demo-python-codegen")  # found current, kept
        builds = [konkord(root, "build") for _ in range(repeat)]
        reports = [konkord(root, "report", "--run", "demo-python-codegen") for _ in range(repeat)]
    anchor = statistics.median(helptext)
    for label, runs in (("no-change build", builds), ("report, up to date", reports)):
        walls = [float(r["wall"]) for r in runs]
        print(
            f"shipped demo, {label + ':':<19} {spread(walls)} "
            f"({statistics.median(walls) / anchor:.1f}x konkord --help; aim < 0.5 s); CPU "
            f"{statistics.median(float(r['cpu_s']) for r in runs):.2f} s; peak "
            f"memory {statistics.median(float(r['main_mib']) for r in runs):.0f} MiB; "
            f"{runs[0]['line']}"
        )


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s [{min(values):.2f}-{max(values):.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--models", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3, help="processes timed per figure")
    parser.add_argument("--demo-only", action="store_true", help="only the shipped demo")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if args.demo_only:
        python = start_time([sys.executable, "-c", "pass"], args.repeat)
        helptext = start_time([sys.executable, "-m", "konkord.cli", "--help"], args.repeat)
        print(
            f"anchors: python -c pass {spread(python)} (CPU "
            f"{start_cpu([sys.executable, '-c', 'pass']):.2f} s); konkord --help "
            f"{spread(helptext)} (CPU "
            f"{start_cpu([sys.executable, '-m', 'konkord.cli', '--help']):.2f} s)"
        )
        demo_figures(args.repeat, helptext)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        make_project(root, args.runs, args.tasks, args.models)
        evidence = sum(p.stat().st_size for p in (root / "runs").rglob("*.jsonl"))
        results = sum(p.stat().st_size for p in (root / "results").glob("*.json"))
        print(
            f"{args.runs} runs x {args.tasks} tasks x {args.models} models, 1 judge; evidence "
            f"{evidence / 1e6:.0f} MB, results files {results / 1e6:.0f} MB (made in "
            f"{time.perf_counter() - started:.0f} s, untimed); {os.cpu_count()} CPUs, load "
            f"average {os.getloadavg()[0]:.1f}"
        )
        python = start_time([sys.executable, "-c", "pass"], args.repeat)
        helptext = start_time([sys.executable, "-m", "konkord.cli", "--help"], args.repeat)
        print(f"anchors: python -c pass {spread(python)}; konkord --help {spread(helptext)}")

        for workers in (1, 2):
            runs = []
            for n in range(args.repeat):
                shutil.rmtree(root / ".konkord", ignore_errors=True)
                runs.append(
                    konkord(root, "build", "--out", f"public-{workers}w-{n}", workers=workers)
                )
            walls = [float(r["wall"]) for r in runs]
            print(
                f"full build, {workers} worker{'s' if workers > 1 else ' '}: {spread(walls)}; peak "
                f"memory main {statistics.median(float(r['main_mib']) for r in runs):.0f} MiB, "
                f"workers {statistics.median(float(r['workers_mib']) for r in runs):.0f} MiB; "
                f"{runs[0]['line']}"
            )
        (root / "public-2w-0").rename(root / "public")
        konkord(root, "build")  # the build a user made last, with its stamp
        again = [konkord(root, "build") for _ in range(args.repeat)]
        walls = [float(r["wall"]) for r in again]
        print(
            f"no-change rebuild:      {spread(walls)} ({statistics.median(walls) / statistics.median(helptext):.1f}x "
            f"konkord --help); CPU {statistics.median(float(r['cpu_s']) for r in again):.2f} s; peak memory {statistics.median(float(r['main_mib']) for r in again):.0f} MiB; "
            f"{again[0]['line']}"
        )
        checked = []
        for _ in range(args.repeat):
            shutil.rmtree(root / ".konkord")
            checked.append(konkord(root, "build"))
        walls = [float(r["wall"]) for r in checked]
        print(
            f"no-change, no stamp:    {spread(walls)} (every stage check and page hash); peak "
            f"memory {statistics.median(float(r['main_mib']) for r in checked):.0f} MiB; "
            f"{checked[0]['line']}"
        )
        template = root / "templates" / "leaderboard.html"
        edits = []
        for n in range(args.repeat):
            text = template.read_text()
            marker = "{% endblock %}"
            cut = text.rindex(marker)
            template.write_text(f"{text[:cut]}<!-- edit {n} -->\n{text[cut:]}")
            edits.append(konkord(root, "build"))
        walls = [float(r["wall"]) for r in edits]
        print(f"one template edited:    {spread(walls)}; {edits[0]['line']}")
        konkord(root, "report", "--run", "run-00")  # found current, kept
        reports = [konkord(root, "report", "--run", "run-00") for _ in range(args.repeat)]
        walls = [float(r["wall"]) for r in reports]
        print(
            f"report, up to date:     {spread(walls)} (aim < 0.5 s); CPU "
            f"{statistics.median(float(r['cpu_s']) for r in reports):.2f} s; peak memory "
            f"{statistics.median(float(r['main_mib']) for r in reports):.0f} MiB; "
            f"{reports[0]['line']}"
        )
    demo_figures(args.repeat, helptext)


if __name__ == "__main__":
    main()
