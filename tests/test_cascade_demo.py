"""The offline demo's cascade: its selective-accuracy table, recomputed here by hand from the
committed evidence (plain loops over the JSON lines, none of Konkord's cascade code)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from konkord.configuration.runspec import resolve_run
from konkord.stages.report.report import build_results
from konkord.stages.report.report_ranking import ReportOptions

REPO = Path(__file__).resolve().parent.parent
RUN = "demo-support-replies"


def latest(path: Path, key_fields: tuple[str, ...]) -> dict[tuple[Any, ...], dict[str, Any]]:
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            out[tuple(record.get(k) for k in key_fields)] = record
    return out


@pytest.fixture(scope="module")
def demo() -> tuple[Any, dict[str, Any]]:
    runs = json.loads((REPO / "runs.json").read_text())
    entry = next(r for r in runs["runs"] if r["name"] == RUN)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO)
        results = build_results(resolve_run(RUN), ReportOptions(resamples=20))
    return results, entry


def test_the_demo_has_a_cascade_that_decides_some_pairs_and_escalates_others(
    demo: tuple[Any, dict[str, Any]],
) -> None:
    results, entry = demo
    strong = entry["judges"][0]["model"]
    block = results.block(strong).cascade
    assert block is not None and block.first_pass == entry["cascade"]["first_pass"]
    assert 0 < block.decided_first_pass < block.pairs and block.pending == 0
    assert block.compared_labels == block.labels > 0  # the strong judge judged every label


def test_selective_table_recomputed_by_hand_from_the_evidence(
    demo: tuple[Any, dict[str, Any]],
) -> None:
    results, entry = demo
    strong, first_pass = entry["judges"][0]["model"], entry["cascade"]["first_pass"]
    run_dir = REPO / "runs" / RUN
    verdicts = latest(
        run_dir / "verdicts.jsonl", ("task_id", "model_a", "model_b", "order", "judge")
    )
    labels = [
        r
        for r in latest(
            run_dir / "labels.jsonl", ("task_id", "model_a", "model_b", "labeller")
        ).values()
        if r.get("winner") is not None
    ]
    pairs: dict[tuple[str, str, str], dict[str, Any]] = {}
    for (task, a, b, order, judge), record in verdicts.items():
        if judge == first_pass and record["kind"] == "verdict":
            one, two, tie = record["probs"]["1"], record["probs"]["2"], record["probs"]["tie"]
            in_models = {a: one, b: two} if order == "ab" else {a: two, b: one}
            in_models["tie"] = tie
            pairs.setdefault((task, a, b), {})[order] = (record["winner"], in_models)
    pairs = {k: v for k, v in pairs.items() if len(v) == 2}
    assert len(pairs) == results.block(strong).cascade.pairs

    def strong_winner(key: tuple[str, str, str]) -> str | None:
        ab, ba = (verdicts.get((*key, o, strong)) for o in ("ab", "ba"))
        if ab is None or ba is None or ab["kind"] != "verdict" or ba["kind"] != "verdict":
            return None
        return ab["winner"] if ab["winner"] == ba["winner"] else "tie"

    def decide(key: tuple[str, str, str], threshold: float) -> tuple[bool, str, str]:
        (win_ab, p_ab), (win_ba, p_ba) = pairs[key]["ab"], pairs[key]["ba"]
        averaged = {o: (p_ab[o] + p_ba[o]) / 2 for o in p_ab}
        lean = max(averaged, key=lambda o: averaged[o])
        return win_ab == win_ba and averaged[win_ab] >= threshold - 1e-9, win_ab, lean

    table = results.block(strong).cascade.selective
    assert [row.threshold for row in table] == pytest.approx(
        [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]
    )
    for row in table:
        t = row.threshold
        decided = sum(decide(key, t)[0] for key in pairs)
        single = sum(
            pairs[key][o][1][pairs[key][o][0]] >= t - 1e-9 for key in pairs for o in ("ab", "ba")
        )
        agree = agree_n = one = one_n = lean_k = lean_n = 0
        for label in labels:
            key = (label["task_id"], label["model_a"], label["model_b"])
            if key not in pairs:
                continue
            ok, verdict, lean = decide(key, t)
            if ok:
                agree_n += 1
                agree += verdict == label["winner"]
            else:
                lean_n += 1
                lean_k += lean == label["winner"]
            for order in ("ab", "ba"):  # each order alone, as a judge asked once
                said, probs = pairs[key][order]
                if probs[said] >= t - 1e-9:
                    one_n += 1
                    one += said == label["winner"]
        assert (row.decided.k, row.decided.n) == (decided, len(pairs)), t
        assert (row.agreement.k, row.agreement.n) == (agree, agree_n), t
        assert (row.one_order_decided.k, row.one_order_decided.n) == (single, 2 * len(pairs)), t
        assert row.one_order_agreement.k == one, t
        assert row.one_order_agreement.n == one_n, t
        assert (row.lean_right.k, row.lean_right.n) == (lean_k, lean_n), t

    # The whole cascade at its threshold against the strong judge alone, on the same labels.
    block = results.block(strong).cascade
    cascade_k = strong_k = n = 0
    for label in labels:
        key = (label["task_id"], label["model_a"], label["model_b"])
        if key not in pairs or strong_winner(key) is None:
            continue
        ok, verdict, _ = decide(key, entry["cascade"]["accept_at"])
        n += 1
        cascade_k += (verdict if ok else strong_winner(key)) == label["winner"]
        strong_k += strong_winner(key) == label["winner"]
    assert (
        block.cascade.agreement.k,
        block.strong_alone.agreement.k,
        block.cascade.agreement.n,
    ) == (
        cascade_k,
        strong_k,
        n,
    )
    escalated = len(pairs) - sum(decide(k, entry["cascade"]["accept_at"])[0] for k in pairs)
    assert block.cascade.strong_calls == 2 * escalated
    assert block.saved_strong_calls == 2 * (len(pairs) - escalated)


def test_site_marks_who_decided_and_never_shows_the_lean_as_a_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    from bs4 import BeautifulSoup
    from click.testing import CliRunner

    from konkord.cli import cli

    monkeypatch.chdir(REPO)
    # --out must stay inside the project: a scratch folder under the ignored public/
    out = REPO / "public" / f"test-{tmp_path.name}"
    request.addfinalizer(lambda: shutil.rmtree(out, ignore_errors=True))
    result = CliRunner().invoke(cli, ["build", "--offline", "--out", str(out)])
    assert result.exit_code == 0, result.output
    page = BeautifulSoup((out / RUN / "calibration" / "index.html").read_text(), "html.parser")
    section = page.select_one("section.cascade")
    assert section is not None
    assert len(section.select("table.selective-table tbody tr")) == 10
    assert "not trusted" in section.get_text()
    assert section.select("svg.selective g.both circle")  # share decided against agreement
    decided = {"first": 0, "escalated": 0}
    for path in (out / RUN / "tasks").glob("*/index.html"):
        task = BeautifulSoup(path.read_text(), "html.parser")
        for note in task.select("p.cascade-pair"):
            text = " ".join(note.get_text().split())
            if text.startswith("Decided by the first pass"):
                decided["first"] += 1
                assert note.select_one(".lean") is None
            else:
                assert text.startswith("No verdict from the first pass: escalated")
                lean = note.select_one("span.lean")
                assert lean is not None and "(not trusted)" in lean.get_text()
                assert note.select_one("strong") is None  # the lean is never shown as a verdict
                decided["escalated"] += 1
    results = json.loads((REPO / "results" / f"{RUN}.json").read_text())
    block = next(b for b in results["judge_blocks"] if b.get("cascade"))["cascade"]
    assert decided == {"first": block["decided_first_pass"], "escalated": block["decided_strong"]}
