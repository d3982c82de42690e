"""Benchmark a leaderboard-size run end to end: run, judge, report and build at 20 models.

The project: one run of --models sim models (default 20) on --tasks distinct tasks (the goal is
1,000; on a shared 2-core machine use what fits, e.g. 200 or 400, and say so), one sim judge, both
orders of every pair: 20 models x 1,000 tasks are 190,000 pairs and 380,000 judge calls.

`run` and `judge` are timed for real on the first --judged tasks (all of them by default). On a
shared machine judging 380,000 simulated calls takes long (over an hour under load), so with
--judged K < --tasks the evidence of those K tasks is then copied under new task ids until the
run has --tasks tasks, each copy a distinct task with its own prompt (its answers' settings hash
and its verdicts' message hashes made again for that prompt, so every record is current), and
`report` and `build` are timed on that: the same records, files and pages a judged run of that
size has. --repeats N times judge, report and build N times each (median and range).

`report` and `build` start from the run as `konkord judge` leaves it: the verdict log with its
columns saved in .konkord/columns (konkord/evidence/verdict_saved.py), and the run stamped as
owing nothing in .konkord/owed (konkord/stages/owed_stamp.py: the judge found so when it ended,
so the build does not compose and hash its 380,000 calls again); made here the way the judge
makes them, where the log was copied rather than judged. `report-cold` times the report of the
same log without them (a log judged by an earlier konkord, or copied from elsewhere): it parses
the log, then saves them. `report` hashes the log as the first report after the judge does (the
judge keeps no hash of a log it has just written: konkord/evidence/log_hashes.py);
`report-again` times a report run again on the same evidence (another rubric, other prices),
which takes the hash the first one kept.

Each step is a whole `konkord` process, interpreter start included: wall seconds and peak memory
(VmHWM of the main process, and the largest peak of any worker process it started). With
--baseline DIR (a checkout of an earlier konkord, e.g. `git archive d6c4d46 | tar -x -C DIR`),
the same steps run with that code on a copy of the same project, in the same session, so the two
columns are measured under the same load. Then the site: its largest file, its total size and
file count, the leaderboard's data, and the largest task page.

Aims on a 2-core machine: report under 5 s and 500 MB; build under 20 s and 1 GB; the largest
file under public/ under 25 MiB (Cloudflare's limit per file).

    python benchmarks/bench_scale.py [--tasks 200] [--judged 30] [--models 20] [--baseline DIR]
    python benchmarks/bench_scale.py --keep /tmp/scale   # keep the project to look at
    python benchmarks/bench_scale.py --keep /tmp/scale --reuse --steps report,report-cold,build \
        --repeats 3
    # the 20 x 1,000 run beside main as it was (git worktree add /tmp/base 8b1acf3):
    nice -n 10 python benchmarks/bench_scale.py --tasks 1000 --judged 50 --baseline /tmp/base \
        --keep /tmp/scale1000 --repeats 3
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
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent

# `konkord ...` exactly as the console script runs it, then the peaks on stderr's last line.
KONKORD = """
import json, resource, sys
def peaks():
    hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    sys.stderr.write("\\n" + json.dumps({"main_mib": hwm / 1024, "workers_mib": workers / 1024}))
from konkord.cli import main
sys.argv = ["konkord", *sys.argv[1:]]
import atexit
atexit.register(peaks)  # the exit hooks run on every way out, a fast exit included
main()
"""

STEPS: dict[str, tuple[str, ...]] = {
    "run": ("run", "--run", "big", "--concurrency", "64"),
    "judge": ("judge", "--run", "big", "--concurrency", "64"),
    "report": ("report", "--run", "big"),
    # the report of a log whose columns no konkord saved (judged by an older one, or copied)
    "report-cold": ("report", "--run", "big"),
    # again, on the same evidence: the log's hash kept by the report before (log_hashes)
    "report-again": ("report", "--run", "big"),
    "build": ("build", "--offline"),
}

# What `konkord judge` does last: the verdict log's columns saved for the commands after it
# (konkord/evidence/verdict_saved.py). Done here where the judge did not make the log (the
# copied evidence of --judged, or a --reuse project), so `report` starts where it would.
SAVE_COLUMNS = """
import importlib.util
from pathlib import Path
from konkord.evidence.log import EvidenceLog
from konkord.evidence.verdict_table import save_columns
save_columns(EvidenceLog(Path("runs/big")))
if importlib.util.find_spec("konkord.stages.owed_stamp"):  # as `konkord judge` ends
    from konkord.configuration.runspec import resolve_run
    from konkord.stages.pipeline import stamp_if_owing_nothing
    assert stamp_if_owing_nothing(resolve_run("big")), "the copied run owes calls"
"""


def save_columns(root: Path, code: Path) -> None:
    """The run as the judge leaves it (by code that does so): its verdict columns saved, and
    it stamped as owing nothing (`konkord.stages.owed_stamp`)."""
    if not (code / "konkord" / "evidence" / "verdict_saved.py").exists():
        return
    env = dict(os.environ, PYTHONPATH=str(code), LITELLM_LOCAL_MODEL_COST_MAP="True")
    subprocess.run([sys.executable, "-c", SAVE_COLUMNS], cwd=root, env=env, check=True)


def konkord(root: Path, code: Path, *args: str) -> dict[str, float | str]:
    """One whole `konkord` process in `root` with the konkord package found in `code`."""
    env = dict(os.environ, PYTHONPATH=str(code), LITELLM_LOCAL_MODEL_COST_MAP="True")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", KONKORD, *args], cwd=root, capture_output=True, text=True, env=env
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds (user + system, workers included): on a shared machine, steadier than wall.
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if result.returncode != 0:
        raise SystemExit(f"konkord {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    peaks = json.loads(result.stderr.strip().splitlines()[-1])
    lines = result.stdout.strip().splitlines()
    return {"wall": wall, "cpu": cpu, **peaks, "line": lines[-1] if lines else ""}


def compile_bytecode(code: Path) -> None:
    """The checkout's modules compiled to bytecode now. pip compiles an installed package's
    modules when it installs them, and an editable install's on their first import; where
    PYTHONDONTWRITEBYTECODE is set (as on some shared machines) nothing is ever kept, and
    every konkord process, workers included, compiles its 200 modules again (about 0.3 s of
    CPU each), which no user of an installed konkord pays."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(code / "konkord")], check=True)


def write_suite(root: Path, n_tasks: int, distinct: int) -> None:
    """Tasks task-0000... whose prompts repeat every `distinct` tasks."""
    tasks = [
        {
            "id": f"task-{k:04d}",
            "prompt": f"Explain item {k % distinct} of the list in a few sentences.",
        }
        for k in range(n_tasks)
    ]
    suite = {"name": "big", "rubric": "Prefer the correct, complete answer.", "tasks": tasks}
    (root / "suites").mkdir(exist_ok=True)
    (root / "suites" / "big.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))


def repeat_evidence(root: Path, judged: int, n_tasks: int) -> None:
    """The evidence of the first `judged` tasks copied under new task ids up to `n_tasks`, each
    copy a distinct task: its own prompt, its answers' settings hash and every verdict's
    message hash made again for that prompt (as `konkord run` and `konkord judge` would make
    them), so every record is current and nothing is shared with the task it was copied from.
    The texts (answers, rationales) are the originals'."""
    from contextlib import chdir

    from konkord.configuration.judge_frame import compose_user_message
    from konkord.configuration.runspec import resolve_run
    from konkord.stages.judge.judge_call import message_sha
    from konkord.stages.run import answer_key_hash, answer_messages

    write_suite(root, n_tasks, n_tasks)
    with chdir(root):
        spec = resolve_run("big")
    tasks = {task.id: task for task in spec.suite.tasks}
    by_task: dict[str, list[dict[str, Any]]] = {}
    answers = root / "runs" / "big" / "answers.jsonl"
    for line in answers.read_bytes().splitlines():
        record = json.loads(line)
        by_task.setdefault(record["task_id"], []).append(record)
    texts = {(r["task_id"], r["model"]): r.get("text") or "" for rs in by_task.values() for r in rs}
    with open(answers, "a") as log:
        for k in range(judged, n_tasks):
            task = tasks[f"task-{k:04d}"]
            settings_hash = answer_key_hash(answer_messages(spec.suite, task), spec.settings)
            for record in by_task[f"task-{k % judged:04d}"]:
                copy = {**record, "task_id": task.id, "settings_hash": settings_hash}
                log.write(json.dumps(copy, sort_keys=True) + "\n")
    verdicts = root / "runs" / "big" / "verdicts.jsonl"
    judged_records: dict[str, list[dict[str, Any]]] = {}
    for line in verdicts.read_bytes().splitlines():
        record = json.loads(line)
        judged_records.setdefault(record["task_id"], []).append(record)
    with open(verdicts, "a") as log:
        for k in range(judged, n_tasks):
            task = tasks[f"task-{k:04d}"]
            source = f"task-{k % judged:04d}"
            for record in judged_records[source]:
                text_a = texts[(source, record["model_a"])]
                text_b = texts[(source, record["model_b"])]
                shown = (text_a, text_b) if record["order"] == "ab" else (text_b, text_a)
                message = compose_user_message(task, spec.suite, *shown)
                copy = {**record, "task_id": task.id, "message_sha": message_sha(message)}
                log.write(json.dumps(copy, sort_keys=True) + "\n")
            if k % 200 == 0:
                print(f"  copied up to task {k}", flush=True)


def make_project(root: Path, code: Path, n_tasks: int, n_models: int) -> None:
    """A suite of distinct tasks and one run of sim models and a sim judge in runs.json."""
    for folder in ("templates", "content"):
        shutil.copytree(code / folder, root / folder)
    write_suite(root, n_tasks, n_tasks)
    models = [
        f"sim/m{i:02d}:strength={1.5 - 3.0 * i / max(1, n_models - 1):.2f}" for i in range(n_models)
    ]
    entry = {
        "name": "big",
        "suite": "suites/big.yaml",
        "models": models,
        "judges": ["sim-judge/referee:accuracy=0.85,position_bias=0.6,tie_rate=0.15"],
        "results": "results/big.json",
    }
    (root / "runs.json").write_text(json.dumps({"runs": [entry]}, indent=1))


def site_figures(public: Path) -> str:
    """The largest file under public/, the total, the file count and the largest task page."""
    files = [p for p in public.rglob("*") if p.is_file()]
    largest = max(files, key=lambda p: p.stat().st_size)
    total = sum(p.stat().st_size for p in files)
    data = [p for p in files if p.suffix == ".json" and "results" in p.parts]
    pages = [p for p in files if "tasks" in p.parts and p.name == "index.html"]
    biggest_page = max((p.stat().st_size for p in pages), default=0)
    return (
        f"largest file {largest.relative_to(public)} {largest.stat().st_size / 2**20:.1f} MiB; "
        f"{len(files)} files, {total / 1e6:.0f} MB; results data "
        f"{sum(p.stat().st_size for p in data) / 1e6:.1f} MB in {len(data)} files; largest "
        f"task page {biggest_page / 1e3:.0f} KB"
    )


def figure(result: dict[str, float | str]) -> str:
    mib = max(float(result["main_mib"]), float(result["workers_mib"]))
    return f"{float(result['wall']):6.1f} s (CPU {float(result['cpu']):5.1f} s) {mib:6.0f} MiB"


def summary(results: list[dict[str, float | str]]) -> str:
    """Median and range of wall, CPU and peak memory over repeats (one run: the figure)."""
    if len(results) == 1:
        return figure(results[0])

    def spread(values: list[float], unit: str, form: str) -> str:
        return (
            f"{statistics.median(values):{form}} {unit} "
            f"[{min(values):{form}}-{max(values):{form}}]"
        )

    walls = [float(r["wall"]) for r in results]
    cpus = [float(r["cpu"]) for r in results]
    mibs = [max(float(r["main_mib"]), float(r["workers_mib"])) for r in results]
    return (
        f"{spread(walls, 's', '.1f')}, CPU {spread(cpus, 's', '.1f')}, "
        f"{spread(mibs, 'MiB', '.0f')}"
    )


# What a step leaves behind, removed before it is timed again (so each repeat does it all).
# The verdict columns the judge saved in .konkord/columns stay (they are the judge's), but for
# report-cold.
MADE_BY = {
    "report": ("results", ".konkord/report", ".konkord/hashes"),
    "report-cold": ("results", ".konkord"),
    "report-again": ("results", ".konkord/report"),
    "build": ("public", ".konkord/build", ".konkord/report"),
    "judge": ("runs/big/verdicts.jsonl", ".konkord"),  # every call made again: no verdict, no cache
}


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument(
        "--judged", type=int, help="tasks run and judged for real (default: all); the rest copies"
    )
    parser.add_argument("--baseline", type=Path, help="an earlier konkord checkout to compare")
    parser.add_argument(
        "--code", type=Path, default=REPO, help="the konkord checkout measured [this one]"
    )
    parser.add_argument("--keep", type=Path, help="make the projects here and keep them")
    parser.add_argument(
        "--steps", default="run,judge,report,build", help="comma-separated steps to time"
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="time --steps (e.g. report,build) again on the --keep projects of an earlier run",
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="times judge, report and build are each timed [1]"
    )
    args = parser.parse_args()
    if args.reuse and args.keep:  # the sizes are the kept project's, not the defaults'
        kept = args.keep / "this"
        args.tasks = len(yaml.safe_load((kept / "suites" / "big.yaml").read_text())["tasks"])
        args.models = len(json.loads((kept / "runs.json").read_text())["runs"][0]["models"])
        args.judged = args.tasks
    steps = args.steps.split(",")
    codes = {"this": args.code.resolve()}
    if args.baseline:
        codes["baseline"] = args.baseline.resolve()
    for code in codes.values():  # as an installed konkord is: compiled once, not on each start
        compile_bytecode(code)
    judged = min(args.judged or args.tasks, args.tasks)
    pairs = args.models * (args.models - 1) // 2

    def sizes(tasks: int) -> str:
        return (
            f"{args.models} models x {tasks} tasks: {args.models * tasks:,} answers, "
            f"{pairs * tasks:,} pairs, {2 * pairs * tasks:,} judge calls"
        )

    print(f"{sizes(args.tasks)}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    if judged < args.tasks:
        print(
            f"run and judge on {sizes(judged)}; their evidence copied as distinct tasks "
            f"up to {args.tasks}"
        )
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        roots = {name: base / name for name in codes}
        for name, code in codes.items():
            if args.reuse:  # a --keep project of an earlier run: its evidence as it is
                shutil.rmtree(roots[name] / "templates", ignore_errors=True)
                shutil.copytree(code / "templates", roots[name] / "templates")
                for made in ("results", "public", ".konkord"):
                    shutil.rmtree(roots[name] / made, ignore_errors=True)
                save_columns(roots[name], code)
                continue
            shutil.rmtree(roots[name], ignore_errors=True)
            roots[name].mkdir(parents=True)
            make_project(roots[name], code, judged, args.models)
        results: dict[str, dict[str, list[dict[str, float | str]]]] = {n: {} for n in codes}
        for step in steps:
            if step == "report" and judged < args.tasks and not args.reuse:
                for name in codes:
                    repeat_evidence(roots[name], judged, args.tasks)
                    save_columns(roots[name], codes[name])
            repeats = args.repeats if step in MADE_BY else 1
            for repeat in range(repeats):
                for name, code in codes.items():  # interleaved: both see the same load
                    # A kept project's own verdicts would leave a timed judge nothing to do.
                    if repeat or args.reuse:
                        for made in MADE_BY.get(step, ()):
                            remove(roots[name] / made)
                    done = konkord(roots[name], code, *STEPS[step])
                    results[name].setdefault(step, []).append(done)
                    print(f"  {step} {name} #{repeat + 1}: {figure(done)}", flush=True)
            row = "   ".join(f"{name}: {summary(results[name][step])}" for name in codes)
            print(f"{step:<7} {row}   ({str(results['this'][step][-1]['line'])[:90]})", flush=True)
        if "build" in steps:
            for name in codes:
                print(f"site ({name}): {site_figures(roots[name] / 'public')}")
        verdicts = roots["this"] / "runs" / "big" / "verdicts.jsonl"
        if verdicts.exists():
            print(f"verdict log {verdicts.stat().st_size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
