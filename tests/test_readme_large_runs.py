"""The README's "Large runs" worked example followed as written: its set-up block (folder, the
two local batch servers, `cd large`), its `large/runs.json`, then every `$ konkord ...` line in
order, each output line the README shows (less the elided `...` parts, batch ids and timings)
found in what the command printed.

The environment has no real key: OPENAI_API_KEY is set but empty, as a shell that exported it
blank has it (where the example once stopped with "Missing credentials"); the servers are local,
so none is needed. KONKORD_BATCH_POLL only shortens the 30 s wait between polls.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def large_runs_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## Large runs")
    return text[start : text.index("\n## ", start + 1)]


def blocks(section: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block, in order."""
    return re.findall(r"```(\w*)\n(.*?)\n```", section, re.DOTALL)


def transcript(body: str) -> list[tuple[str, list[str]]]:
    """`$ command` lines with the output lines shown under each."""
    steps: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    return steps


def wait_for_port(port: int) -> None:
    for _ in range(200):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


def shown_lines(expected: list[str]) -> list[str]:
    """What of the README's output a run must print: elisions cut, ids and timings left out."""
    wanted = []
    for line in expected:
        line = line.split("; ...")[0].strip()
        if not line or line == "..." or line.startswith("batch ") or line.startswith("verdicts"):
            continue
        wanted.append(line)
    return wanted


@pytest.mark.slow
def test_the_large_runs_example_runs_as_written(tmp_path: Path) -> None:
    section = large_runs_section()
    fenced = blocks(section)
    setup = next(body for lang, body in fenced if "openai_batch_server.py" in body)
    runs_json = next(body for lang, body in fenced if lang == "json")
    session = next(body for lang, body in fenced if body.startswith("$ konkord"))
    assert "`large/runs.json`" in section
    for folder in ("suites", "tests"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_API_BASE"))}
    env.update(
        OPENAI_API_KEY="",
        PYTHONPATH=str(ROOT),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        KONKORD_BATCH_POLL="0.2",
    )
    cwd, servers = tmp_path, []
    try:
        for line in setup.splitlines():
            words = shlex.split(line)
            if words[0] == "cd":
                cwd = cwd / words[1]
            elif words[-1] == "&":
                assert words[0] == "python"
                servers.append(
                    subprocess.Popen(
                        [sys.executable, *words[1:-1]], cwd=cwd, env=env,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    )
                )
                wait_for_port(int(words[-2]))
            else:
                subprocess.run(line, shell=True, cwd=cwd, env=env, check=True)
        assert cwd == tmp_path / "large"
        (cwd / "runs.json").write_text(runs_json + "\n")
        steps = transcript(session)
        assert [c.split()[1] for c, _ in steps] == ["run", "run", "judge", "judge", "judge"]
        for command, expected in steps:
            words = shlex.split(command)
            done = subprocess.run(
                [sys.executable, "-m", "konkord.cli", *words[1:]], cwd=cwd, env=env,
                capture_output=True, text=True, timeout=600, check=False,
            )
            output = done.stdout + done.stderr
            stopped = "--max-cost 0.05" in command  # the README says this one exits 1
            assert done.returncode == (1 if stopped else 0), f"`{command}`:\n{output[-3000:]}"
            assert "Missing credentials" not in output and "Traceback" not in output
            for line in shown_lines(expected):
                assert line in output, f"`{command}` did not print {line!r}:\n{output[-3000:]}"
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=10)
    verdicts = (cwd / "runs/local/verdicts.jsonl").read_text()
    assert verdicts.count('"deployment": "gpu-a"') > 0 and verdicts.count('"deployment": "gpu-b"') > 0


def test_what_following_the_readme_leaves_is_ignored_by_git() -> None:
    """wrangler dev's state, `konkord simulate`'s default plot and the Large-runs folder are
    not left as untracked files in a clone."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout")
    left = [".wrangler/state/v3/cache.db", "simulate.svg", "large/runs.json", "large/runs/x.jsonl"]
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", *left], cwd=ROOT, capture_output=True, text=True,
        check=False,
    )
    assert sorted(done.stdout.split()) == sorted(left), done.stderr
