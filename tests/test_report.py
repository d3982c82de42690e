"""The report stage on hand-built evidence: figures that can be worked out by hand."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO
from evidence_factory import add_answers, add_prompt, add_verdict, write_runs, write_suite

from konkord.cli import cli
from konkord.configuration.runspec import resolve_run
from konkord.errors import KonkordError
from konkord.results.schema import SCHEMA_VERSION, read_results, write_results
from konkord.stages.report.report import ReportOptions, build_results

FAST = ReportOptions(resamples=200, seed=1)


def make_run(root: Path, models: list[str], n_tasks: int = 10, cost: float | None = 0.001):
    suite = write_suite(root, n_tasks)
    write_runs(root, [{"name": "r", "suite": "suites/tiny.yaml", "models": models}])
    return add_answers(root, "r", suite, models, cost=cost)


def test_a_strict_order_is_recovered_with_claims(project: Path) -> None:
    texts = make_run(project, ["m/a", "m/b", "m/c"])
    for k in range(10):
        task = f"t{k:02d}"
        # a beats b and c, b beats c; in order "ab" the first shown is the alphabetically first.
        add_verdict(project, "r", texts, task, "m/a", "m/b", ("1", "2"))
        add_verdict(project, "r", texts, task, "m/a", "m/c", ("1", "2"))
        add_verdict(project, "r", texts, task, "m/b", "m/c", ("1", "2"))
    results = build_results(resolve_run("r"), FAST)
    block = results.judge_blocks[0]
    assert [r.model for r in block.ratings] == ["m/a", "m/b", "m/c"]
    raw = {r.model: r.raw_win_rate.estimate for r in block.ratings}
    assert raw == {"m/a": 1.0, "m/b": 0.5, "m/c": 0.0}
    assert {r.model: r.comparisons for r in block.ratings} == {"m/a": 20, "m/b": 20, "m/c": 20}
    assert block.diagnostics.flip_rate.rate == 0.0
    assert block.diagnostics.positional.share_first.rate == 0.5
    assert block.rank_groups == [["m/a"], ["m/b"], ["m/c"]]
    assert [r.rank for r in block.ratings] == [1, 2, 3]
    above = [c for c in block.claims if c.kind == "above"]
    assert [c.text for c in above] == ["m/a ranks above m/b and m/c.", "m/b ranks above m/c."]
    assert [c.models for c in above] == [["m/a", "m/b", "m/c"], ["m/b", "m/c"]]
    assert block.diagnostics.cycles.cyclic == 0
    assert block.diagnostics.cycles.decided_triples == 10
    for row in block.ratings:
        assert (
            row.win_rate_vs_field.low
            <= row.win_rate_vs_field.estimate
            <= row.win_rate_vs_field.high
        )
    assert block.calibration.status == "uncalibrated"


def test_a_judge_that_always_picks_the_first_slot_flips_everything(project: Path) -> None:
    texts = make_run(project, ["m/a", "m/b", "m/c"])
    for k in range(10):
        for x, y in (("m/a", "m/b"), ("m/a", "m/c"), ("m/b", "m/c")):
            add_verdict(project, "r", texts, f"t{k:02d}", x, y, ("1", "1"))
    block = build_results(resolve_run("r"), FAST).judge_blocks[0]
    assert block.diagnostics.flip_rate.rate == 1.0
    assert block.diagnostics.flip_rate.n == 30
    assert block.diagnostics.positional.share_first.rate == 1.0
    assert len(block.rank_groups) == 1 and sorted(block.rank_groups[0]) == ["m/a", "m/b", "m/c"]
    assert {r.rank for r in block.ratings} == {1}
    assert not [c for c in block.claims if c.kind == "above"]
    assert all(r.raw_win_rate.estimate == 0.5 for r in block.ratings)
    assert block.diagnostics.flips_by_pair[0].proportion.rate == 1.0


def test_a_disconnected_graph_is_an_error_naming_the_parts(project: Path) -> None:
    texts = make_run(project, ["m/a", "m/b", "m/c", "m/d"], n_tasks=3)
    for k in range(3):
        add_verdict(project, "r", texts, f"t{k:02d}", "m/a", "m/b", ("1", "2"))
        add_verdict(project, "r", texts, f"t{k:02d}", "m/c", "m/d", ("1", "2"))
    with pytest.raises(KonkordError, match=r"disconnected \(\{m/a, m/b\}; \{m/c, m/d\}\)"):
        build_results(resolve_run("r"), FAST)


def test_one_order_only_is_incomplete_not_a_tie(project: Path) -> None:
    texts = make_run(project, ["m/a", "m/b"], n_tasks=4)
    for k in range(3):
        add_verdict(project, "r", texts, f"t{k:02d}", "m/a", "m/b", ("1", "2"))
    # t03: write both then find only one order by using a different judge for the second.
    add_verdict(project, "r", texts, "t03", "m/a", "m/b", ("2", "2"))
    log_path = project / "runs" / "r" / "verdicts.jsonl"
    lines = log_path.read_text().splitlines()
    log_path.write_text("\n".join(lines[:-1]) + "\n")  # drop the "ba" order of t03
    block = build_results(resolve_run("r"), FAST).judge_blocks[0]
    assert block.diagnostics.coverage.incomplete_pairs == 1
    assert block.diagnostics.coverage.verdicts_present == 7
    assert block.diagnostics.coverage.verdicts_expected == 8
    assert {r.model: r.comparisons for r in block.ratings} == {"m/a": 3, "m/b": 3}


def test_unknown_prices_are_flagged_never_summed_as_zero(project: Path) -> None:
    texts = make_run(project, ["m/a", "m/b"], n_tasks=2, cost=None)
    for k in range(2):
        add_verdict(project, "r", texts, f"t{k:02d}", "m/a", "m/b", ("1", "2"))
    results = build_results(resolve_run("r"), FAST)
    generation = {c.who: c for c in results.cost if c.role == "generation"}
    assert generation["m/a"].cost_usd is None
    assert generation["m/a"].unknown_price_calls == 2
    judge = next(c for c in results.cost if c.role == "judge")
    assert judge.cost_usd == pytest.approx(4 * 0.002)
    assert judge.median_latency_s == 1.0


def test_the_judge_prompt_is_read_back_from_the_evidence(project: Path) -> None:
    texts = make_run(project, ["m/a", "m/b"], n_tasks=2)
    for k in range(2):
        add_verdict(project, "r", texts, f"t{k:02d}", "m/a", "m/b", ("1", "2"))
    add_prompt(project, "r", "THE PROMPT THAT RAN, word for word.")
    block = build_results(resolve_run("r"), FAST).judge_blocks[0]
    assert block.system_prompt == "THE PROMPT THAT RAN, word for word."
    assert block.frame_hash == "frame0001"


def test_results_round_trip_and_other_versions_are_refused(project: Path) -> None:
    texts = make_run(project, ["m/a", "m/b", "m/c"], n_tasks=5)
    for k in range(5):
        add_verdict(project, "r", texts, f"t{k:02d}", "m/a", "m/b", ("1", "2"))
        add_verdict(project, "r", texts, f"t{k:02d}", "m/b", "m/c", ("tie", "tie"))
    results = build_results(resolve_run("r"), FAST)
    path = project / "results" / "r.json"
    write_results(results, path)
    assert read_results(path) == results
    data = json.loads(path.read_text())
    data["schema_version"] = SCHEMA_VERSION + 1
    path.write_text(json.dumps(data))
    with pytest.raises(KonkordError, match=r"schema version 2, but this konkord reads version 1"):
        read_results(path)


def test_same_seed_gives_identical_results_and_judgment_bootstrap_differs(project: Path) -> None:
    texts = make_run(project, ["m/a", "m/b", "m/c"], n_tasks=8)
    for k in range(8):
        pattern = ("1", "2") if k % 3 else ("2", "1")
        add_verdict(project, "r", texts, f"t{k:02d}", "m/a", "m/b", pattern)
        add_verdict(project, "r", texts, f"t{k:02d}", "m/b", "m/c", ("1", "2"))
        add_verdict(project, "r", texts, f"t{k:02d}", "m/a", "m/c", ("tie", "1"))
    spec = resolve_run("r")
    first = build_results(spec, FAST).model_dump_json()
    second = build_results(spec, FAST).model_dump_json()
    assert first == second
    naive = build_results(spec, ReportOptions(resamples=200, seed=1, unit="judgments"))
    assert naive.judge_blocks[0].bootstrap.unit == "judgments"
    assert naive.model_dump_json() != first


def test_report_command_prints_a_table_and_writes_the_file(project: Path) -> None:
    texts = make_run(project, ["m/a", "m/b"], n_tasks=3)
    for k in range(3):
        add_verdict(project, "r", texts, f"t{k:02d}", "m/a", "m/b", ("1", "2"))
    outcome = CliRunner().invoke(cli, ["report", "--run", "r", "--resamples", "100"])
    assert outcome.exit_code == 0, outcome.output
    assert "UNCALIBRATED" in outcome.output
    assert "m/a" in outcome.output and "order flips 0.0%" in outcome.output
    assert (project / "results" / "r.json").exists()
    schema = CliRunner().invoke(cli, ["schema"])
    assert json.loads(schema.output)["properties"]["schema_version"]["default"] == SCHEMA_VERSION


ENDS_WITH_REPORT = """
import atexit, gc, sys
atexit.register(lambda: print("collector on at exit:", gc.isenabled(), file=sys.stderr))
sys.argv = ["konkord", "report", "--run", "r", "--resamples", "20"]
from konkord.cli import main
main()
"""


def test_the_collector_stays_off_to_the_end_only_where_the_process_ends_with_the_report(
    project: Path,
) -> None:
    """The console script's report leaves the cyclic collector off to its exit (turned on, it
    would walk every object the report made just before they are let go); run in a process
    that goes on (here, the tests'), the report leaves it as it found it."""
    texts = make_run(project, ["m/a", "m/b"], n_tasks=3)
    for k in range(3):
        add_verdict(project, "r", texts, f"t{k:02d}", "m/a", "m/b", ("1", "2"))
    assert gc.isenabled()
    outcome = CliRunner().invoke(cli, ["report", "--run", "r", "--resamples", "20"])
    assert outcome.exit_code == 0, outcome.output
    assert gc.isenabled()
    (project / "results" / "r.json").unlink()
    done = subprocess.run(
        [sys.executable, "-c", ENDS_WITH_REPORT], cwd=project, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "wrote results/r.json" in done.stdout
    assert "collector on at exit: False" in done.stderr


def test_a_run_without_verdicts_says_what_to_do(project: Path) -> None:
    make_run(project, ["m/a", "m/b"], n_tasks=2)
    with pytest.raises(KonkordError, match="konkord judge --run r"):
        build_results(resolve_run("r"), FAST)
