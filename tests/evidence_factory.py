"""Hand-built runs for tests: a suite, runs.json entry and evidence records written directly.

Writing records directly (instead of calling models) lets a test state exactly which verdicts
exist, so the expected figures can be worked out by hand.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from konkord.configuration.suite import load_suite
from konkord.evidence.log import EvidenceLog, now_iso
from konkord.evidence.verdicts import answer_sha
from konkord.providers.llm import CallSettings
from konkord.stages.run import answer_key_hash, answer_messages

SETTINGS = CallSettings()


def write_suite(root: Path, n_tasks: int, name: str = "tiny", **extra: Any) -> Path:
    """A suite with tasks t00..tNN, written to root/suites/<name>.yaml."""
    data = {
        "name": name,
        "rubric": "Prefer the answer that is correct and complete.",
        "tasks": [{"id": f"t{k:02d}", "prompt": f"Question number {k}?"} for k in range(n_tasks)],
        **extra,
    }
    path = root / "suites" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def write_runs(root: Path, runs: list[dict[str, Any]]) -> Path:
    """runs.json with the given run entries."""
    path = root / "runs.json"
    path.write_text(json.dumps({"runs": runs}, indent=2))
    return path


def add_answers(
    root: Path,
    run: str,
    suite_path: Path,
    models: list[str],
    cost: float | None = 0.001,
    text_for: Callable[[str, str], str] | None = None,
) -> dict[tuple[str, str], str]:
    """A good answer for every (task, model), its text from `text_for(task_id, model)` if
    given; returns (task, model) -> answer text."""
    suite = load_suite(suite_path)
    log = EvidenceLog(root / "runs" / run)
    texts = {}
    records = []
    for task in suite.tasks:
        messages = answer_messages(suite, task)
        for model in models:
            text = text_for(task.id, model) if text_for else f"Answer of {model} to {task.id}."
            texts[(task.id, model)] = text
            records.append(
                {
                    "kind": "answer",
                    "task_id": task.id,
                    "model": model,
                    "settings_hash": answer_key_hash(messages, SETTINGS),
                    "settings": {"temperature": 0.0, "max_tokens": 4096, "seed": 0},
                    "text": text,
                    "finish_reason": "stop",
                    "tokens_in": 10,
                    "tokens_out": 20,
                    "cost_usd": cost,
                    "latency_s": 0.5,
                    "error": None,
                    "error_kind": None,
                    "attempts": 1,
                    "created_at": "2026-01-02T03:04:05+00:00",
                }
            )
    log.append_many("answers", records)
    return texts


def add_verdict(
    root: Path,
    run: str,
    texts: dict[tuple[str, str], str],
    task_id: str,
    model_x: str,
    model_y: str,
    first_wins: tuple[str, str],
    judge: str = "judge/j1",
    frame_hash: str = "frame0001",
) -> None:
    """Both orders of one pair. first_wins[k] is "1", "2" or "tie" for order k (ab, ba)."""
    model_a, model_b = sorted((model_x, model_y))
    log = EvidenceLog(root / "runs" / run)
    for order, position in zip(("ab", "ba"), first_wins, strict=True):
        first = model_a if order == "ab" else model_b
        second = model_b if order == "ab" else model_a
        winner = {"1": first, "2": second, "tie": "tie"}[position]
        log.append(
            "verdicts",
            {
                "kind": "verdict",
                "task_id": task_id,
                "model_a": model_a,
                "model_b": model_b,
                "order": order,
                "judge": judge,
                "frame_hash": frame_hash,
                "position_winner": position,
                "winner": winner,
                "rationale": f"Reasoning for {task_id} {order}.",
                "raw": f"Reasoning.\nVERDICT: {position.upper()}",
                "answer_a_sha": answer_sha(texts[(task_id, model_a)]),
                "answer_b_sha": answer_sha(texts[(task_id, model_b)]),
                "cost_usd": 0.002,
                "tokens_in": 100,
                "tokens_out": 30,
                "latency_s": 1.0,
                "created_at": now_iso(),
            },
        )


def add_prompt(root: Path, run: str, text: str, frame_hash: str = "frame0001") -> None:
    """The stored system prompt of a frame hash."""
    EvidenceLog(root / "runs" / run).append(
        "prompts",
        {
            "kind": "prompt",
            "frame_hash": frame_hash,
            "system_prompt": text,
            "created_at": now_iso(),
        },
    )
