"""How fast `konkord validate` reads a large suite and refuses a YAML alias bomb; prints figures.

    python benchmarks/bench_validate.py [--tasks 300000]

Writes a valid suite of N tasks (300,000 by default, about 54 MB) and the 1 KB "billion
laughs" of tests/data/bad_inputs/alias_bomb.yaml into a temporary folder, then runs the real
`konkord validate` on each in a fresh process and prints wall time, CPU time and peak memory.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def write_suite(path: Path, tasks: int) -> None:
    lines = ["name: big", "rubric: |", "  Prefer the correct answer, then the clearer one.",
             "tasks:"]
    for i in range(tasks):
        lines += [f"  - id: task-{i:06d}", "    prompt: |",
                  f"      Explain item number {i} briefly, in two or three sentences, for a",
                  "      reader who knows the field but not this particular corner of it."]
    path.write_text("\n".join(lines) + "\n")


def measure(path: Path) -> str:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "konkord.cli", "validate", str(path)],
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    said = (done.stdout + done.stderr).strip().splitlines()[-1][:100]
    return (f"{wall:.2f} s wall, {cpu:.2f} s CPU, peak {after.ru_maxrss / 1024:.0f} MB, "
            f"exit {done.returncode}: {said}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=300_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bomb = Path(tmp, "alias_bomb.yaml")
        shutil.copy(REPO / "tests" / "data" / "bad_inputs" / "alias_bomb.yaml", bomb)
        print(f"alias bomb ({bomb.stat().st_size} bytes): {measure(bomb)}")
        suite = Path(tmp, "big.yaml")
        write_suite(suite, args.tasks)
        size = suite.stat().st_size / 1e6
        print(f"suite of {args.tasks} tasks ({size:.0f} MB): {measure(suite)}")


if __name__ == "__main__":
    main()
