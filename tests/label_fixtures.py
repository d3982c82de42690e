"""Scratch runs for the labelling tests: a suite, a run manifest, and answers written directly."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from konkord.configuration.runspec import RunSpec, resolve_run, write_manifest
from konkord.configuration.suite import load_suite
from konkord.evidence.log import EvidenceLog, now_iso
from konkord.stages.run import answer_key_hash, answer_messages

# Distinctive names, so a test can search every rendered element for them.
MODELS = ("openai/zebra-model", "anthropic/quokka-model", "sim/walrus-model")
JUDGE_SECRET = "JUDGE-RATIONALE-MARKER"


def plain_answer(task_id: str, model_index: int) -> str:
    """An answer that says which task and which answer it is, but never the model name."""
    return f"Reply for {task_id}, variant V{model_index}.\n\nSome *prose* here."


def make_run(
    root: Path,
    name: str = "demo",
    n_tasks: int = 25,
    models: tuple[str, ...] = MODELS,
    answer_language: str | None = None,
    answer_text: Callable[[str, int], str | None] = plain_answer,
    with_verdicts: bool = True,
    prompt: Callable[[int], str] = lambda i: f"Explain item number {i} briefly.",
    rubric: str = "Prefer the answer that is correct, then the one that is clearer.",
) -> RunSpec:
    """Write a suite and a manifest under `root` (the cwd) and answers for every task and model.

    `answer_text` returning None records a failed answer for that (task, model).
    """
    if Path.cwd().resolve() != root.resolve():
        raise RuntimeError("make_run writes runs/ relative to the cwd: chdir into root first")
    suite_path = root / "suites" / f"{name}.yaml"
    suite_path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        f"name: {name}",
        "rubric: |",
        *(f"  {line}" for line in rubric.splitlines()),
        "context: |",
        "  You are helping a careful reader.",
    ]
    if answer_language:
        lines.append(f"answer_language: {answer_language}")
    lines.append("tasks:")
    for i in range(n_tasks):
        lines += [f"  - id: task-{i:02d}", "    prompt: |"]
        lines += [f"      {line}" for line in prompt(i).splitlines()]
    suite_path.write_text("\n".join(lines) + "\n")
    write_manifest(
        RunSpec(
            name=name,
            suite_path=Path("suites") / f"{name}.yaml",
            suite=load_suite(suite_path),
            models=models,
        )
    )
    spec = resolve_run(name)
    log = EvidenceLog(spec.run_dir)
    records = []
    for task in spec.suite.tasks:
        key = answer_key_hash(answer_messages(spec.suite, task), spec.settings)
        for index, model in enumerate(models):
            text = answer_text(task.id, index)
            records.append(
                {
                    "kind": "answer",
                    "task_id": task.id,
                    "model": model,
                    "settings_hash": key,
                    "settings": {"temperature": 0.0, "max_tokens": 4096, "seed": 0},
                    "text": text,
                    "finish_reason": "stop" if text is not None else None,
                    "tokens_in": 10,
                    "tokens_out": 20,
                    "cost_usd": None,
                    "latency_s": 0.1,
                    "error": None if text is not None else "HTTP 500",
                    "error_kind": None if text is not None else "transient",
                    "attempts": 1,
                    "created_at": now_iso(),
                }
            )
    log.append_many("answers", records)
    if with_verdicts:
        verdicts = []
        for task in spec.suite.tasks:
            a, b = sorted(models)[:2]
            verdicts.append(
                {
                    "kind": "verdict", "task_id": task.id, "model_a": a, "model_b": b,
                    "order": "ab", "judge": "sim/judge-gecko", "frame_hash": "f" * 12,
                    "position_winner": "1", "winner": a,
                    "rationale": f"{JUDGE_SECRET} Answer 1 is better.",
                    "raw": f"{JUDGE_SECRET}\nVERDICT: 1", "created_at": now_iso(),
                }
            )  # fmt: skip
        log.append_many("verdicts", verdicts)
    return spec


def text_to_model(spec: RunSpec, models: tuple[str, ...] = MODELS) -> dict[str, str]:
    """Which model wrote which answer text (the tests' way to see through the blinding)."""
    return {
        plain_answer(task.id, index): model
        for task in spec.suite.tasks
        for index, model in enumerate(models)
    }


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def free_port() -> int:
    """A local TCP port nobody listens on right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_label_app(root: Path, run: str, port: int, *args: str) -> subprocess.Popen[bytes]:
    """`konkord label` in its own process group, serving on `port` once this returns."""
    import urllib.request

    command = [sys.executable, "-m", "konkord.cli", "label", "--run", run, "--port", str(port),
               "--no-browser", *args]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=root, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(600):
        if process.poll() is not None:
            raise RuntimeError(f"konkord label exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1):
                return process
        except OSError:
            time.sleep(0.1)
    kill_group(process)
    raise RuntimeError("the labelling app did not start within a minute")


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """kill -9 the command and the Streamlit server it started."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
