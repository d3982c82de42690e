"""100,000 judge requests through the batch path; prints wall time and peak memory.

    python benchmarks/bench_batch.py            # 100,000 requests
    python benchmarks/bench_batch.py 20000      # fewer

Each request is a real judge call as the judge stage builds it (Konkord's frame, a rubric, a
task, two answers of about 700 characters), asked through `BatchClient.complete()` exactly as
the stage asks: the requests are written to JSONL spool files, uploaded to a local fake of the
OpenAI files and batches endpoints with litellm's `acreate_file`, submitted with
`acreate_batch` (50,000 per batch, OpenAI's limit), polled with `aretrieve_batch`, downloaded
with `afile_content(stream=True)`, and every reply is parsed into a CallResult and then into a
verdict with the judge's own parser. The fake runs in its own process, so its CPU and memory do
not count; the figures are the client's. Aim: under 60 s and under 500 MB.
"""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import time
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SERVER = REPO / "tests" / "openai_batch_server.py"
JUDGE = "openai/bench-judge"
T0 = time.perf_counter()
MODELS = [f"openai/model-{i:02d}" for i in range(20)]


def peak_mb() -> float:
    """Peak resident memory of this process so far, in MB (Linux reports KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_suite(directory: Path, n_tasks: int) -> Path:
    lines = ["name: bench", "rubric: Prefer the correct, complete and clear answer.", "tasks:"]
    for i in range(n_tasks):
        lines += [
            f"  - id: t{i:04d}",
            f"    prompt: Write a function that solves problem number {i} and explain it.",
        ]
    path = directory / "bench.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@cache
def answer(task: int, model: int) -> str:
    """One answer text per (task, model), shared by its calls as the stage shares them."""
    body = f"def solve_{task}(x):\n    return x * {model} + {task}\n"
    prose = f"The function multiplies by {model} and adds {task}; it runs in constant time. "
    return f"```python\n{body}```\n\n" + prose * 6


async def ask_all(n: int, url: str, directory: Path) -> tuple[int, int, float]:
    from itertools import combinations

    from konkord.batch import BatchClient
    from konkord.evidence import EvidenceLog
    from konkord.judge_frame import parse_verdict
    from konkord.runspec import RunSpec
    from konkord.stages.judge import JudgeItem, judge_messages, judge_settings
    from konkord.suite import load_suite

    pairs = list(combinations(range(len(MODELS)), 2))
    n_tasks = max(1, -(-n // (2 * len(pairs))))
    suite_path = write_suite(directory, n_tasks)
    spec = RunSpec("bench", suite_path, load_suite(suite_path), tuple(MODELS), (JUDGE,))
    settings = judge_settings(512, url)
    client = BatchClient(
        log=EvidenceLog(directory / "runs" / "bench"),
        cache_dir=directory / ".konkord" / "cache",
        poll_s=0.05,
        quiet_s=0.2,
        on_status=lambda text: print(f"  {time.perf_counter() - T0:6.1f} s  {text}"),
    )
    decided = 0
    failed = 0
    parse_s = 0.0

    async def one(index: int) -> None:
        nonlocal decided, failed, parse_s
        task_index, rest = divmod(index, 2 * len(pairs))
        (a, b), order = pairs[rest // 2], ("ab", "ba")[rest % 2]
        item = JudgeItem(
            spec.suite.tasks[task_index], MODELS[a], MODELS[b], order, JUDGE,
            answer(task_index, a), answer(task_index, b),
        )
        result = await client.complete(JUDGE, judge_messages(spec, item), settings)
        started = time.perf_counter()
        if result.ok and parse_verdict(result.text).position is not None:
            decided += 1
        else:
            failed += 1
        parse_s += time.perf_counter() - started

    await asyncio.gather(*(one(i) for i in range(n)))
    return decided, failed, parse_s


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-not-a-real-key")
    server = subprocess.Popen(
        [sys.executable, str(SERVER)], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "tests")},
    )
    assert server.stdout is not None
    url = server.stdout.readline().strip()
    try:
        from konkord.llm import load_litellm

        load_litellm()  # the 5 s import is not the batch path's cost
        import konkord.batch  # noqa: F401

        baseline = peak_mb()
        with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
            os.chdir(tmp)
            global T0
            started = T0 = time.perf_counter()
            decided, failed, parse_s = asyncio.run(ask_all(n, url, Path(tmp)))
            wall = time.perf_counter() - started
            batches = (Path(tmp) / "runs" / "bench" / "batches.jsonl").read_text().count(
                '"submitted"'
            )
    finally:
        server.terminate()
        server.wait()
    print(f"judge requests through the batch path: {n:,} in {batches} batches")
    print(f"  verdicts parsed {decided:,}, failed {failed:,}")
    print(f"  wall time {wall:.1f} s ({n / wall:,.0f} requests/s; aim < 60 s)")
    print(f"  of which parsing verdicts {parse_s:.1f} s")
    print(f"  peak memory {peak_mb():.0f} MB (after importing litellm: {baseline:.0f} MB; "
          "aim < 500 MB)")


if __name__ == "__main__":
    main()
