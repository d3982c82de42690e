"""The run stage against a real local OpenAI-compatible server: what it sent, what it recorded."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from openai_server import OpenAIServer, Reply, user_text

from konkord.configuration.runs_config import Price
from konkord.configuration.suite import Suite, Task
from konkord.evidence.log import EvidenceLog
from konkord.providers.llm import CallSettings, ModelClient
from konkord.providers.loading import load_litellm
from konkord.stages.run import RunSummary, answer_messages, current_answers, generate_answers

SUITE = Suite(
    name="tiny",
    rubric="Prefer correct answers.",
    context="You answer for ACME Anvils.",
    tasks=(
        Task(id="alpha", prompt="What is 1 + 1?"),
        Task(id="beta", prompt="What is 2 + 2?"),
        Task(id="gamma", prompt="What is 3 + 3?"),
    ),
)
MODELS = ("openai/test-a", "openai/test-b")


def _client(**overrides: Any) -> ModelClient:
    settings: dict[str, Any] = {
        "concurrency": 4,
        "max_retries": 2,
        "backoff_base_s": 0.01,
        "timeout_s": 5.0,
        "cache_dir": Path(".konkord/cache"),
    }
    return ModelClient(**(settings | overrides))


def _run(
    server: OpenAIServer,
    client: ModelClient | None = None,
    models: tuple[str, ...] = MODELS,
    force: bool = False,
    suite: Suite = SUITE,
    **settings: Any,
) -> RunSummary:
    call = CallSettings(api_base=server.url, **settings)
    return asyncio.run(
        generate_answers(EvidenceLog("runs/tiny"), suite, models, call, client or _client(), force)
    )


def _records() -> list[dict[str, Any]]:
    return EvidenceLog("runs/tiny").records("answers")


def _task_of(body: dict[str, Any]) -> str:
    text = user_text(body)
    for task in SUITE.tasks:
        if task.prompt in text:
            return task.id
    raise AssertionError(text)


def _by_task(script: Callable[[str, int], Reply]) -> Callable[[dict[str, Any], int], Reply]:
    """A responder keyed by task id and how many times that task was asked so far."""
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def respond(body: dict[str, Any], n: int) -> Reply:
        task = _task_of(body)
        with lock:
            seen[task] = seen.get(task, 0) + 1
            count = seen[task]
        return script(task, count)

    return respond


def test_one_answer_per_task_and_model_with_what_was_sent(
    project: Path, openai_server: OpenAIServer
) -> None:
    summary = _run(openai_server, temperature=0.7, max_tokens=321, seed=11)
    assert (summary.generated, summary.failed, summary.cached) == (6, 0, 0)
    assert len(openai_server.requests) == 6
    sent = {(b["model"], _task_of(b)) for b in openai_server.requests}
    assert sent == {(m.split("/")[1], t.id) for m in MODELS for t in SUITE.tasks}
    body = openai_server.requests[0]
    assert body["max_tokens"] == 321
    assert body["temperature"] == 0.7
    assert body["seed"] == 11
    assert body["messages"][0] == {"role": "system", "content": "You answer for ACME Anvils."}
    assert body["messages"][1]["role"] == "user"

    records = _records()
    assert len(records) == 6
    record = next(r for r in records if r["task_id"] == "beta" and r["model"] == MODELS[0])
    assert record["text"] == "answer to: What is 2 + 2?"
    assert record["finish_reason"] == "stop"
    assert (record["tokens_in"], record["tokens_out"]) == (10, 5)
    assert record["cost_usd"] is None  # the test model has no price: unknown, not zero
    assert summary.unknown_price_models == set(MODELS)
    assert record["error"] is None and record["error_kind"] is None
    assert record["attempts"] == 1
    assert record["latency_s"] > 0
    assert record["settings"] == {"temperature": 0.7, "max_tokens": 321, "seed": 11}
    assert record["kind"] == "answer" and record["created_at"].endswith("+00:00")


def test_concurrency_limit_is_respected_for_a_slow_server(
    project: Path, openai_server: OpenAIServer
) -> None:
    in_flight = 0
    peak = 0
    lock = threading.Lock()

    def slow(body: dict[str, Any], n: int) -> Reply:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        time.sleep(0.15)
        with lock:
            in_flight -= 1
        return Reply(content=f"slow {n}")

    openai_server.responder = slow
    suite = SUITE.model_copy(
        update={"tasks": tuple(Task(id=f"t{i}", prompt=f"Question {i}") for i in range(12))}
    )
    summary = _run(openai_server, client=_client(concurrency=3), models=(MODELS[0],), suite=suite)
    assert summary.generated == 12
    assert peak == 3
    assert all(r["latency_s"] >= 0.15 for r in _records())


def test_rate_limits_are_retried_with_backoff(project: Path, openai_server: OpenAIServer) -> None:
    openai_server.responder = _by_task(
        lambda task, count: Reply(status=429) if task == "beta" and count <= 2 else Reply("fine")
    )
    summary = _run(openai_server, models=(MODELS[0],))
    assert summary.failed == 0
    asked = [_task_of(b) for b in openai_server.requests]
    assert asked.count("beta") == 3 and asked.count("alpha") == 1
    beta = next(r for r in _records() if r["task_id"] == "beta")
    assert (beta["text"], beta["attempts"], beta["error"]) == ("fine", 3, None)


def test_server_errors_exhaust_retries_then_are_recorded_as_transient(
    project: Path, openai_server: OpenAIServer
) -> None:
    openai_server.responder = _by_task(
        lambda task, count: Reply(status=500) if task == "gamma" else Reply("fine")
    )
    summary = _run(openai_server, client=_client(max_retries=3), models=(MODELS[0],))
    assert summary.failed == 1 and summary.generated == 2
    assert [_task_of(b) for b in openai_server.requests].count("gamma") == 4
    gamma = next(r for r in _records() if r["task_id"] == "gamma")
    assert gamma["text"] is None
    assert gamma["error_kind"] == "transient"
    assert gamma["error"].startswith("InternalServerError")
    assert gamma["attempts"] == 4
    assert summary.failures == [f"gamma / {MODELS[0]}: {gamma['error']}"]


def test_a_hang_past_the_timeout_is_retried_then_recorded(
    project: Path, openai_server: OpenAIServer
) -> None:
    openai_server.responder = _by_task(
        lambda task, count: Reply(delay_s=3.0) if task == "alpha" else Reply("quick")
    )
    _run(openai_server, client=_client(timeout_s=0.4, max_retries=1), models=(MODELS[0],))
    alpha = next(r for r in _records() if r["task_id"] == "alpha")
    assert alpha["error"].startswith("Timeout")
    assert (alpha["error_kind"], alpha["attempts"]) == ("transient", 2)
    assert [_task_of(b) for b in openai_server.requests].count("alpha") == 2


def test_a_truncated_answer_is_kept_with_its_finish_reason(
    project: Path, openai_server: OpenAIServer
) -> None:
    openai_server.responder = lambda body, n: Reply("half an ans", finish_reason="length")
    summary = _run(openai_server, models=(MODELS[0],), max_tokens=3)
    assert summary.failed == 0
    assert {(r["text"], r["finish_reason"], r["error"]) for r in _records()} == {
        ("half an ans", "length", None)
    }
    assert len(openai_server.requests) == 3


@pytest.mark.parametrize(
    "garbage",
    [
        b"{not json",
        b"<html>502 Bad Gateway</html>",
        b'{"id": "x", "object": "chat.completion", "choices": []}',
    ],
)
def test_malformed_responses_are_retried_and_never_crash_the_run(
    project: Path, openai_server: OpenAIServer, garbage: bytes
) -> None:
    openai_server.responder = _by_task(
        lambda task, count: Reply(raw_body=garbage) if count == 1 else Reply("second try")
    )
    summary = _run(openai_server, models=(MODELS[0],))
    assert summary.failed == 0 and summary.generated == 3
    assert len(openai_server.requests) == 6
    assert {(r["text"], r["attempts"]) for r in _records()} == {("second try", 2)}


CONTEXT_WINDOW = json.dumps(
    {
        "error": {
            "message": "This model's maximum context length is 8192 tokens. However, your "
            "messages resulted in 9000 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
).encode()


@pytest.mark.parametrize(
    ("reply", "error_type"),
    [
        (Reply(status=401), "AuthenticationError"),
        (Reply(status=400), "BadRequestError"),
        (Reply(status=404), "NotFoundError"),
        (Reply(status=400, raw_body=CONTEXT_WINDOW), "ContextWindowExceededError"),
    ],
)
def test_permanent_errors_are_recorded_at_once(
    project: Path, openai_server: OpenAIServer, reply: Reply, error_type: str
) -> None:
    openai_server.responder = lambda body, n: reply
    summary = _run(openai_server, client=_client(max_retries=4), models=(MODELS[0],))
    assert summary.failed == 3
    assert len(openai_server.requests) == 3  # one each, no retry
    for record in _records():
        assert record["error_kind"] == "permanent"
        assert record["attempts"] == 1
        assert record["error"].startswith(error_type)


def test_a_rerun_makes_no_call_for_recorded_answers_and_retries_failures(
    project: Path, openai_server: OpenAIServer
) -> None:
    openai_server.responder = _by_task(
        lambda task, count: Reply(status=401) if task == "beta" else Reply(f"{task} ok")
    )
    first = _run(openai_server)
    assert (first.generated, first.failed) == (4, 2)
    assert len(openai_server.requests) == 6

    openai_server.responder = _by_task(lambda task, count: Reply(f"{task} fixed"))
    second = _run(openai_server)
    assert (second.already_recorded, second.generated, second.failed) == (4, 2, 0)
    retried = openai_server.requests[6:]
    assert sorted(_task_of(b) for b in retried) == ["beta", "beta"]

    third = _run(openai_server)
    assert (third.already_recorded, third.generated) == (6, 0)
    assert len(openai_server.requests) == 8

    current = current_answers(EvidenceLog("runs/tiny"), SUITE, CallSettings(api_base="elsewhere"))
    assert {k: r["text"] for k, r in current.items()} == {
        (t.id, m): f"{t.id} {'fixed' if t.id == 'beta' else 'ok'}" for t in SUITE.tasks for m in MODELS
    }


def test_force_regenerates_past_the_cache(project: Path, openai_server: OpenAIServer) -> None:
    _run(openai_server)
    openai_server.responder = lambda body, n: Reply(f"new {n}")
    summary = _run(openai_server, force=True)
    assert (summary.generated, summary.already_recorded, summary.cached) == (6, 0, 0)
    assert len(openai_server.requests) == 12
    current = current_answers(EvidenceLog("runs/tiny"), SUITE, CallSettings())
    assert all(r["text"].startswith("new ") for r in current.values())
    assert len(_records()) == 12  # old answers stay in the log, superseded


def test_a_failed_regeneration_does_not_replace_a_good_answer(
    project: Path, openai_server: OpenAIServer
) -> None:
    _run(openai_server, models=(MODELS[0],))
    openai_server.responder = lambda body, n: Reply(status=401)
    summary = _run(openai_server, models=(MODELS[0],), force=True)
    assert summary.failed == 3
    current = current_answers(EvidenceLog("runs/tiny"), SUITE, CallSettings())
    assert all(r["error"] is None and r["text"].startswith("answer to") for r in current.values())


def test_lost_evidence_is_rebuilt_from_the_cache_without_calls(
    project: Path, openai_server: OpenAIServer
) -> None:
    _run(openai_server)
    original = {(r["task_id"], r["model"]): r["text"] for r in _records()}
    Path("runs/tiny/answers.jsonl").unlink()
    summary = _run(openai_server)
    assert (summary.cached, summary.generated) == (6, 0)
    assert summary.cost_usd == 0 and not summary.unknown_price_models
    assert len(openai_server.requests) == 6
    assert {(r["task_id"], r["model"]): r["text"] for r in _records()} == original


@pytest.mark.parametrize(
    "change",
    [
        {"temperature": 0.5},
        {"max_tokens": 100},
        {"seed": 1},
    ],
)
def test_every_generation_setting_is_part_of_the_key(
    project: Path, openai_server: OpenAIServer, change: dict[str, Any]
) -> None:
    _run(openai_server)
    summary = _run(openai_server, **change)
    assert (summary.generated, summary.cached, summary.already_recorded) == (6, 0, 0)
    assert len(openai_server.requests) == 12


def test_a_changed_prompt_or_context_asks_again_only_where_it_changed(
    project: Path, openai_server: OpenAIServer
) -> None:
    _run(openai_server)
    edited = SUITE.model_copy(
        update={"tasks": (SUITE.tasks[0].model_copy(update={"prompt": "What is 1 + 2?"}),
                          *SUITE.tasks[1:])}
    )
    summary = _run(openai_server, suite=edited)
    assert (summary.generated, summary.already_recorded) == (2, 4)
    new_context = SUITE.model_copy(update={"context": "You answer for ACME Rockets."})
    summary = _run(openai_server, suite=new_context)
    assert summary.generated == 6


def test_cache_key_covers_model_messages_and_every_setting() -> None:
    client = ModelClient(cache_dir=None)
    messages = answer_messages(SUITE, SUITE.tasks[0])
    base = CallSettings()
    key = client.cache_key("m", messages, base)
    variants = [
        client.cache_key("other", messages, base),
        client.cache_key("m", [*messages, {"role": "user", "content": "more"}], base),
        client.cache_key("m", messages, CallSettings(temperature=0.1)),
        client.cache_key("m", messages, CallSettings(max_tokens=1)),
        client.cache_key("m", messages, CallSettings(seed=None)),
        client.cache_key("m", messages, CallSettings(api_base="http://other/v1")),
    ]
    assert len({key, *variants}) == 7
    assert client.cache_key("m", messages, CallSettings()) == key


def test_prices_from_runs_json_and_from_litellms_map(
    project: Path, openai_server: OpenAIServer
) -> None:
    priced = "openai/my-private-model"
    known = "openai/gpt-4o-mini"
    client = _client(prices={priced: Price(input_per_million=0.5, output_per_million=1.5)})
    summary = _run(openai_server, client=client, models=(priced, known))
    litellm = load_litellm()
    entry = litellm.model_cost["gpt-4o-mini"]
    expected_known = 10 * entry["input_cost_per_token"] + 5 * entry["output_cost_per_token"]
    for record in _records():
        if record["model"] == priced:
            assert record["cost_usd"] == pytest.approx((10 * 0.5 + 5 * 1.5) / 1e6)
        else:
            assert record["cost_usd"] == pytest.approx(expected_known)
    assert summary.cost_usd == pytest.approx(3 * (12.5e-6 + expected_known))
    assert summary.unknown_price_models == set()


def test_sim_models_answer_offline_through_litellm(project: Path) -> None:
    summary = asyncio.run(
        generate_answers(
            EvidenceLog("runs/tiny"),
            SUITE,
            ("sim/alpha", "sim/beta"),
            CallSettings(),
            _client(),
        )
    )
    assert summary.generated == 6
    assert all(r["text"] and r["cost_usd"] == 0.0 for r in _records())


def test_response_cache_survives_torn_lines_and_later_entries_win(tmp_path: Path) -> None:
    from konkord.providers.llm import CallResult, ResponseCache

    cache = ResponseCache(tmp_path)
    first, second = "a" * 64, "b" * 64
    cache.put(first, CallResult(text="one", finish_reason="stop", attempts=1))
    cache.put(second, CallResult(text=None, error="boom"))  # failures are never cached
    with open(cache.path, "ab") as handle:
        handle.write(second.encode() + b' {"text": "half a rec')  # a kill mid-write
    other = ResponseCache(tmp_path)  # another process, reading the file afresh
    hit = other.get(first)
    assert hit is not None and (hit.text, hit.cached, hit.attempts) == ("one", True, 1)
    assert other.get(second) is None
    other.put(first, CallResult(text="two \ud800", attempts=2))
    again = ResponseCache(tmp_path).get(first)
    assert again is not None and again.text == "two \ud800"
    assert other.get(first) is not None and other.get(first).text == "two \ud800"  # type: ignore[union-attr]


def test_backoff_and_timeout_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from konkord.errors import KonkordError

    monkeypatch.setenv("KONKORD_BACKOFF_BASE", "0.25")
    monkeypatch.setenv("KONKORD_TIMEOUT", "7")
    client = ModelClient()
    assert (client.backoff_base_s, client.timeout_s) == (0.25, 7.0)
    monkeypatch.setenv("KONKORD_TIMEOUT", "soon")
    with pytest.raises(KonkordError, match="KONKORD_TIMEOUT='soon' is not a number"):
        ModelClient()


def test_an_unwritable_log_stops_the_run_with_a_clear_error(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from konkord.errors import KonkordError

    def disk_full(self: EvidenceLog, stream: str, records: list[dict[str, Any]]) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(EvidenceLog, "append_many", disk_full)
    with pytest.raises(KonkordError) as caught:
        asyncio.run(
            generate_answers(EvidenceLog("runs/tiny"), SUITE, ("sim/a",), CallSettings(), _client())
        )
    assert str(caught.value) == (
        f"{Path('runs/tiny/answers.jsonl')}: cannot write (No space left on device); the answers "
        "saved so far are kept: fix this and run the same command again"
    )


def test_an_unreadable_log_is_a_clear_error(project: Path) -> None:
    from konkord.errors import KonkordError

    Path("runs").mkdir()
    Path("runs/tiny").write_text("a file where the run's folder should be")
    with pytest.raises(KonkordError, match=r"answers\.jsonl: cannot read \(Not a directory\)"):
        EvidenceLog("runs/tiny").records("answers")
