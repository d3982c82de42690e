"""Benchmark the judge stage per call against its anchor, the bare `litellm.acompletion`.

A project of --models sim models on --tasks distinct tasks is made and run (`konkord run`), then,
in one process, alternating --repeats times:

- **bare**: `litellm.acompletion` on the sim judge provider (as `konkord.sim.register` registers
  it) with exactly the messages and settings `konkord judge` sends, through --concurrency
  workers: litellm's own per-call work plus the simulated judge, and nothing of Konkord's.
- **konkord**: `judge_run` of the same run through a `ModelClient` (cache, retries, budget, the
  verdict records written to the evidence log and flushed per record), the verdicts and the
  response cache removed before each repeat so every call is made.

With --routes ...,pool, the stage is also timed with its calls made in --processes worker
processes (`konkord judge --processes`), their start and their CPU included.

With --routes bare-split, the bare route is also timed split over --processes processes (each
with its own interpreter lock; litellm's worker threads share one), from a common start once
each has imported litellm: the most a second core could give the stage.

Each prints wall and CPU time (user + sys of the process, threads included) per call, median
[range] over the repeats. What lies between the two is Konkord's own per-call work.

    nice -n 10 python benchmarks/bench_judge_calls.py --tasks 53 --repeats 3   # 20,140 calls
    python benchmarks/bench_judge_calls.py --routes bare,bare-split --processes 2
    python benchmarks/bench_judge_calls.py --tasks 10 --profile bare      # pyinstrument, to stdout
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import chdir
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
JUDGE = "sim-judge/referee:accuracy=0.85,position_bias=0.6,tie_rate=0.15"


def make_project(root: Path, n_tasks: int, n_models: int) -> None:
    """A suite of distinct tasks, one run of sim models and the sim judge, answered."""
    import yaml

    tasks = [
        {"id": f"task-{k:04d}", "prompt": f"Explain item {k} of the list in a few sentences."}
        for k in range(n_tasks)
    ]
    (root / "suites").mkdir(parents=True)
    suite = {"name": "big", "rubric": "Prefer the correct, complete answer.", "tasks": tasks}
    (root / "suites" / "big.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    models = [
        f"sim/m{i:02d}:strength={1.5 - 3.0 * i / max(1, n_models - 1):.2f}" for i in range(n_models)
    ]
    entry = {"name": "big", "suite": "suites/big.yaml", "models": models, "judges": [JUDGE]}
    (root / "runs.json").write_text(json.dumps({"runs": [entry]}, indent=1))
    env = dict(os.environ, PYTHONPATH=str(REPO), LITELLM_LOCAL_MODEL_COST_MAP="True")
    subprocess.run(
        [sys.executable, "-m", "konkord.cli", "run", "--run", "big", "--concurrency", "64"],
        cwd=root, env=env, check=True, capture_output=True,
    )


def cpu_now() -> float:
    """CPU seconds of this process and of its children waited for (the pool's workers)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


async def bare(calls: list[dict[str, Any]], concurrency: int) -> None:
    """Every call straight through litellm.acompletion, `concurrency` at a time."""
    from konkord.providers.loading import load_litellm

    litellm = load_litellm()
    queue = iter(calls)

    async def worker() -> None:
        for kwargs in queue:
            response = await litellm.acompletion(**kwargs)
            assert "VERDICT:" in response.choices[0].message.content

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def bare_calls(root: Path) -> list[dict[str, Any]]:
    """The judge stage's calls as litellm.acompletion's arguments (ModelClient's, exactly)."""
    from konkord.configuration.runspec import resolve_run
    from konkord.evidence.log import EvidenceLog
    from konkord.providers.llm import DEFAULT_TIMEOUT_S
    from konkord.stages.judge.judge_call import judge_messages, judge_settings
    from konkord.stages.judge.owed import judge_items

    spec = resolve_run("big")
    items, _ = judge_items(spec, EvidenceLog(spec.run_dir), (JUDGE,))
    settings = judge_settings(8192, None)
    return [
        {
            "model": item.judge,
            "messages": judge_messages(spec, item),
            "max_tokens": settings.max_tokens,
            "timeout": DEFAULT_TIMEOUT_S,
            "num_retries": 0,
            "max_retries": 0,
            "temperature": settings.temperature,
            "seed": settings.seed,
        }
        for item in items
    ]


async def konkord_judge(concurrency: int, processes: int = 1) -> int:
    """The judge stage as `konkord judge --concurrency N --processes P` runs it (no progress
    bar); with P > 1 its workers' start (imports) is timed too."""
    from konkord.configuration.runspec import resolve_run
    from konkord.providers.llm import ModelClient
    from konkord.stages.judge.judge import judge_run

    spec = resolve_run("big")
    client = ModelClient(concurrency=concurrency, prices=spec.prices)
    client.processes = processes
    summary = await judge_run(spec, (JUDGE,), client, concurrency=concurrency)
    return sum(t.judged for t in summary.tallies.values())


async def flushed(route: Any) -> None:
    """A route, then litellm's success logging of its calls (queued to run after each call,
    and otherwise carried into the next route's event loop and timed there)."""
    from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

    await route()
    await GLOBAL_LOGGING_WORKER.flush()


def bare_shard(root: Path, shard: int, parts: int, concurrency: int, conn: Any) -> None:
    """One process of the split bare route: its share of the calls, timed from the parent's go."""
    sys.path.insert(0, str(REPO))
    with chdir(root):
        calls = bare_calls(root)[shard::parts]
        asyncio.run(flushed(lambda: bare(calls[:50], concurrency)))  # imports, first calls
        conn.send("ready")
        conn.recv()
        cpu = cpu_now()
        asyncio.run(flushed(lambda: bare(calls, concurrency)))
        conn.send((len(calls), cpu_now() - cpu))


def bare_split(root: Path, parts: int, concurrency: int) -> tuple[float, float]:
    """The bare route split over `parts` processes (each `concurrency / parts` calls at a time),
    started and warmed first: (wall from the go to the last one done, CPU of all of them)."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # litellm runs threads: no fork
    pipes = [context.Pipe() for _ in range(parts)]
    workers = [
        context.Process(
            target=bare_shard, args=(root, k, parts, max(1, concurrency // parts), pipes[k][1])
        )
        for k in range(parts)
    ]
    for worker in workers:
        worker.start()
    for mine, _ in pipes:
        assert mine.recv() == "ready"
    started = time.perf_counter()
    for mine, _ in pipes:
        mine.send("go")
    done = [mine.recv() for mine, _ in pipes]
    wall = time.perf_counter() - started
    for worker in workers:
        worker.join()
    return wall, sum(cpu for _, cpu in done)


def fresh(root: Path) -> None:
    """No verdicts and no cached replies: every judge call is made again."""
    (root / "runs" / "big" / "verdicts.jsonl").unlink(missing_ok=True)
    shutil.rmtree(root / ".konkord" / "cache", ignore_errors=True)


def spread(values: list[float], form: str) -> str:
    return f"{statistics.median(values):{form}} [{min(values):{form}}-{max(values):{form}}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=53, help="20 models x 53 tasks: 20,140 calls")
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--routes",
        default="bare,konkord",
        help="which to time, comma-separated: bare, konkord, bare-split (bare litellm over "
        "--processes processes, each with its own interpreter lock: what a second core could "
        "give) and pool (the stage with --processes worker processes making its calls, their "
        "start and their CPU included)",
    )
    parser.add_argument("--processes", type=int, default=2, help="for bare-split and pool [2]")
    parser.add_argument("--profile", choices=("bare", "konkord"), help="one run, pyinstrument")
    parser.add_argument("--keep", type=Path, help="make the project here (reused if there)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    with tempfile.TemporaryDirectory() as tmp:
        root = (args.keep or Path(tmp) / "project").resolve()
        if not (root / "runs" / "big" / "answers.jsonl").exists():
            shutil.rmtree(root, ignore_errors=True)
            make_project(root, args.tasks, args.models)
        with chdir(root):
            calls = bare_calls(root)
            n = len(calls)
            print(
                f"{n:,} judge calls ({args.models} models x {args.tasks} tasks, both orders), "
                f"concurrency {args.concurrency}; {os.cpu_count()} CPUs, load average "
                f"{os.getloadavg()[0]:.1f}",
                flush=True,
            )
            routes = {
                "bare": lambda: bare(calls, args.concurrency),
                "konkord": lambda: konkord_judge(args.concurrency),
                "pool": lambda: konkord_judge(args.concurrency, args.processes),
            }
            # imports and first-call setup
            asyncio.run(flushed(lambda: bare(calls[:200], args.concurrency)))
            if args.profile:
                from pyinstrument import Profiler

                fresh(root)
                with Profiler(async_mode="disabled") as profiler:
                    asyncio.run(flushed(routes[args.profile]))
                profiler.print(show_all=bool(os.environ.get("SHOW_ALL")), short_mode=False)
                return
            walls: dict[str, list[float]] = {}
            cpus: dict[str, list[float]] = {}
            for repeat in range(args.repeats):
                for name in args.routes.split(","):
                    fresh(root)
                    if name == "bare-split":
                        wall, cpu = bare_split(root, args.processes, args.concurrency)
                    else:
                        cpu, started = cpu_now(), time.perf_counter()
                        asyncio.run(flushed(routes[name]))
                        wall, cpu = time.perf_counter() - started, cpu_now() - cpu
                    walls.setdefault(name, []).append(wall / n * 1e3)
                    cpus.setdefault(name, []).append(cpu / n * 1e3)
                    print(
                        f"  {name} #{repeat + 1}: {wall:6.1f} s wall, {cpu:6.1f} s CPU "
                        f"({wall / n * 1e3:.2f} / {cpu / n * 1e3:.2f} ms a call), load "
                        f"{os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
            for name in walls:
                print(
                    f"{name:8} ms a call: wall {spread(walls[name], '.2f')}, "
                    f"CPU {spread(cpus[name], '.2f')}"
                )
            if {"bare", "konkord"} <= walls.keys():
                gap = statistics.median(cpus["konkord"]) - statistics.median(cpus["bare"])
                print(f"Konkord's own work: {gap:.2f} ms CPU a call (median minus median)")


if __name__ == "__main__":
    main()
