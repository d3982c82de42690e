"""How fast `konkord run` is against a local OpenAI-compatible server; prints figures.

    python benchmarks/bench_run.py            # all three measurements
    python benchmarks/bench_run.py a c        # only some of them

(a) 1,000 requests at 500 ms latency with 16 calls in flight (2 models x 500 tasks,
    --concurrency 8 per model), wall time against the ideal 1000 x 0.5 / 16 s (aim: <= 1.2x).
(b) 2,000 requests at 0 ms latency with 32 calls in flight (2 models x 1000 tasks,
    --concurrency 16 per model), `konkord run`'s throughput against a bare loop of
    litellm.acompletion with a semaphore of 32 (aim: >= 0.9x).
(c) start-up time of `konkord --help` and `konkord validate SUITE` (aim: < 0.5 s).

The server runs in its own process so that its CPU does not count against the client. Both
(a) and (b) run the real command in-process (click, progress bar, cache, evidence log with
fsync), after litellm has been imported once, so the figures are the run's own cost and not
the 5 s import; the bare loop gets the same warm-up.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SERVER = REPO / "tests" / "openai_server.py"
FAKE_KEY = "sk-bench-not-a-real-key"


def start_server(delay_s: float) -> tuple[subprocess.Popen[str], str]:
    """The test server in a child process; returns it and its api_base."""
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "0", str(delay_s)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    return proc, url


def write_suite(directory: Path, n_tasks: int) -> Path:
    """A suite of `n_tasks` short prompts."""
    lines = ["name: bench", "rubric: Be correct and brief.", "tasks:"]
    for i in range(n_tasks):
        lines += [f"  - id: t{i:05d}", f"    prompt: Task number {i}, answer briefly."]
    path = directory / "bench.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def konkord_run(n_tasks: int, per_model_concurrency: int, url: str) -> float:
    """Wall time of `konkord run` (in-process) over 2 models x n_tasks, in a fresh directory."""
    from click.testing import CliRunner

    from konkord.cli import cli

    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        suite = write_suite(Path(tmp), n_tasks)
        runner = CliRunner()
        started = time.perf_counter()
        result = runner.invoke(
            cli,
            [
                "run",
                "--suite",
                str(suite),
                "--models",
                "openai/bench-a,openai/bench-b",
                "--api-base",
                url,
                "--concurrency",
                str(per_model_concurrency),
            ],
            catch_exceptions=False,
        )
        elapsed = time.perf_counter() - started
        os.chdir(REPO)
        if result.exit_code != 0:
            raise SystemExit(f"konkord run failed:\n{result.output}")
        lines = Path(tmp, "runs", "bench", "answers.jsonl").read_text().splitlines()
        assert len(lines) == 2 * n_tasks, len(lines)
    return elapsed


def bare_loop(n_requests: int, concurrency: int, url: str) -> float:
    """Wall time of n_requests litellm.acompletion calls under one semaphore, nothing else."""
    from konkord.llm import load_litellm

    litellm = load_litellm()

    async def main() -> None:
        gate = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with gate:
                await litellm.acompletion(
                    model=f"openai/bench-{'ab'[i % 2]}",
                    messages=[{"role": "user", "content": f"Task number {i}, answer briefly."}],
                    api_base=url,
                    max_tokens=4096,
                    temperature=0.0,
                    seed=0,
                    timeout=120,
                    num_retries=0,
                    max_retries=0,
                )

        await asyncio.gather(*(one(i) for i in range(n_requests)))

    started = time.perf_counter()
    asyncio.run(main())
    return time.perf_counter() - started


def warm_up(url: str) -> None:
    """Import litellm and make one call, so neither contender pays for it."""
    bare_loop(4, 2, url)


def bench_latency() -> None:
    proc, url = start_server(0.5)
    try:
        warm_up(url)
        wall = konkord_run(500, 8, url)
        bare = bare_loop(1000, 16, url)
    finally:
        proc.terminate()
        proc.wait()
    ideal = 1000 * 0.5 / 16
    print(
        f"(a) 1000 requests, 500 ms each, 16 in flight: konkord run {wall:.1f} s; ideal "
        f"{ideal:.2f} s; ratio {wall / ideal:.2f}x (aim <= 1.2x); for reference a bare "
        f"litellm loop takes {bare:.1f} s ({bare / ideal:.2f}x): litellm's own CPU per call "
        f"is serialised on one event loop"
    )


def _timed(work: Callable[[], float]) -> tuple[float, float]:
    """(wall, CPU of this process) seconds of one call."""
    cpu = time.process_time()
    wall = work()
    return wall, time.process_time() - cpu


def bench_throughput(repeats: int = 3) -> None:
    proc, url = start_server(0.0)
    try:
        warm_up(url)
        bare: list[tuple[float, float]] = []
        kon: list[tuple[float, float]] = []
        for _ in range(repeats):  # interleaved, so both see the same machine load
            bare.append(_timed(lambda: bare_loop(2000, 32, url)))
            kon.append(_timed(lambda: konkord_run(1000, 16, url)))
    finally:
        proc.terminate()
        proc.wait()
    best_bare, best_kon = min(w for w, _ in bare), min(w for w, _ in kon)
    med_bare = statistics.median(w for w, _ in bare)
    med_kon = statistics.median(w for w, _ in kon)
    cpu_bare = statistics.median(c for _, c in bare) / 2000 * 1000
    cpu_kon = statistics.median(c for _, c in kon) / 2000 * 1000
    print(
        f"(b) 2000 requests, 0 ms, 32 in flight: bare litellm loop {2000 / best_bare:.0f} req/s "
        f"(best of {repeats}), konkord run {2000 / best_kon:.0f} req/s; "
        f"ratio {best_bare / best_kon:.2f}x best-of, {med_bare / med_kon:.2f}x median "
        f"(aim >= 0.9x); client CPU per request: bare {cpu_bare:.1f} ms, "
        f"konkord {cpu_kon:.1f} ms; wall s bare {[round(w, 1) for w, _ in bare]}, "
        f"konkord {[round(w, 1) for w, _ in kon]}"
    )


def bench_startup(repeats: int = 5) -> None:
    konkord = Path(sys.executable).parent / "konkord"
    command = [str(konkord)] if konkord.exists() else [sys.executable, "-m", "konkord.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        suite = write_suite(Path(tmp), 30)
        for label, args in (("konkord --help", ["--help"]), ("konkord validate", [str(suite)])):
            if label == "konkord validate":
                args = ["validate", *args]
            times = []
            for _ in range(repeats):
                started = time.perf_counter()
                subprocess.run([*command, *args], check=True, capture_output=True)
                times.append(time.perf_counter() - started)
            print(
                f"(c) {label}: median {statistics.median(times):.3f} s, "
                f"max {max(times):.3f} s over {repeats} (aim < 0.5 s)"
            )


def main() -> None:
    os.environ.setdefault("OPENAI_API_KEY", FAKE_KEY)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    wanted = set(sys.argv[1:]) or {"a", "b", "c"}
    if "c" in wanted:
        bench_startup()
    if "a" in wanted:
        bench_latency()
    if "b" in wanted:
        bench_throughput()


if __name__ == "__main__":
    main()
