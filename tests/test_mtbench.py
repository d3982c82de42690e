"""MT-Bench human judgments: the import, and calibrate reproducing the published table."""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import SHARED

from konkord.cli import cli
from konkord.configuration.runspec import resolve_run
from konkord.errors import KonkordError
from konkord.evidence.log import EvidenceLog
from konkord.evidence.verdicts import combine_verdicts, load_verdicts
from konkord.importers.mtbench import JUDGE, import_mtbench
from konkord.results.schema import read_results
from konkord.stages.calibrate.calibrate_run import calibrate_run
from konkord.stages.label.labels import current_labels
from konkord.stages.report.report import ReportOptions, answer_shas, build_results, good_answers
from konkord.stages.report.report_family import CAVEAT
from konkord.stages.run import current_answers

DATA = SHARED / "data" / "mtbench_human_judgments"
needs_data = pytest.mark.skipif(
    not (DATA / "human.jsonl").exists(),
    reason=f"the MT-Bench human judgments are not in {DATA} (shared data folder absent)",
)
# Zheng et al. 2023, Table 5, as quoted in ../shared/data/mtbench_human_judgments/README.md:
# turn -> (judge vs human S1, S2, human vs human S1, S2), each (rounded %, comparisons)
PUBLISHED = {
    1: ((66, 1343), (85, 859), (63, 721), (81, 479)),
    2: ((66, 1325), (85, 864), (67, 707), (82, 474)),
}


def published_rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines()]


@needs_data
def test_calibrate_reproduces_the_published_table(project: Path) -> None:
    runner = CliRunner()
    files = [str(DATA / "human.jsonl"), str(DATA / "gpt4_pair.jsonl")]
    out = runner.invoke(cli, ["import", "mt-bench-human", *files, "--run", "mtb"])
    assert out.exit_code == 0, out.output
    out = runner.invoke(cli, ["report", "--run", "mtb", "--resamples", "50"])
    assert out.exit_code == 0, out.output
    # Every pair owes its two orders though no answer was imported (it once read 4800/0).
    assert "verdicts 4800/4800" in " ".join(out.output.split())
    out = runner.invoke(cli, ["calibrate", "--run", "mtb"])
    assert out.exit_code == 0, out.output
    for turn, (s1, s2, h1, h2) in PUBLISHED.items():
        line = (
            f"turn {turn}: judge vs people {s1[0]}% ({s1[1]}), without ties {s2[0]}% ({s2[1]}); "
            f"people vs people {h1[0]}% ({h1[1]}), without ties {h2[0]}% ({h2[1]})"
        )
        assert line in out.output
    calibration = read_results("results/mtb.json").block(JUDGE).calibration
    got = {}
    for group in calibration.by_turn:
        hh = group.human_human
        assert hh is not None
        got[int(group.key.split()[-1])] = tuple(
            (round(100 * (p.rate or 0)), p.n)
            for p in (group.agreement, group.agreement_no_ties, hh.agreement, hh.agreement_no_ties)
        )
    assert got == PUBLISHED
    # Intervals resample whole questions: a question's two turns are one cluster, as a
    # conversation's turns are in a run of one's own (160 turn ids, 80 questions).
    assert calibration.agreement.clusters == 80
    assert {g.agreement.clusters for g in calibration.by_turn} == {80}
    assert all(g.single_turn_tasks == 0 for g in calibration.by_turn)
    # The ranking resamples questions too, and ranks each turn the same way; a claim about
    # gpt-4 or gpt-3.5-turbo carries the judge's same-family caveat there as well.
    block = read_results("results/mtb.json").block(JUDGE)
    assert [(t.turn, t.tasks, t.pairs) for t in block.by_turn] == [(1, 80, 1200), (2, 80, 1200)]
    assert all(len(t.ratings) == 6 for t in block.by_turn)
    top = block.by_turn[1].claims[0]
    assert top.kind == "above" and top.models[0] == "gpt-4" and top.text.endswith(CAVEAT + ".")
    assert "sign test over the 80 tasks" in " ".join([*block.methods, *block.captions.values()])


@needs_data
def test_the_imported_verdicts_combine_back_to_the_published_votes(project: Path) -> None:
    import_mtbench([DATA / "gpt4_pair.jsonl", DATA / "human.jsonl"], run="mtb")
    log = EvidenceLog("runs/mtb")
    combined = {
        (c.task_id, c.model_a, c.model_b): c for c in combine_verdicts(load_verdicts(log, JUDGE))
    }
    rows = published_rows("gpt4_pair.jsonl")
    assert len(combined) == len(rows) == 2400
    for row in rows:
        a, b, winner = row["model_a"], row["model_b"], row["winner"]
        verdict = combined[(f"q{row['question_id']}-t{row['turn']}", *sorted((a, b)))]
        assert verdict.complete
        expected = {"model_a": a, "model_b": b}.get(winner, "tie")
        assert (verdict.winner, verdict.flipped) == (expected, winner == "tie (inconsistent)")
    # the per-order split of an inconsistent tie was not published: the placeholders alternate
    # between positions so that the report's positional split is not invented
    placeholders = Counter(
        r["position_winner"] for r in load_verdicts(log, JUDGE) if r["reconstructed"]
    )
    inconsistent = sum(r["winner"] == "tie (inconsistent)" for r in rows)
    assert placeholders == {"1": inconsistent, "2": inconsistent}


@needs_data
def test_no_expert_vote_is_lost_and_authors_are_kept_apart(project: Path) -> None:
    rows = published_rows("human.jsonl")
    kinds = Counter(r["judge"].split("_")[0] for r in rows)
    summary = import_mtbench([DATA / "human.jsonl"], run="experts")
    labels = current_labels(EvidenceLog("runs/experts"))
    assert summary.labels == len(labels) == kinds["expert"] == 2668
    kept = Path("runs/experts/import/author_votes.jsonl").read_text().splitlines()
    assert len(kept) == kinds["author"] == 687
    assert not any(k[3].startswith("author") for k in labels)
    with_authors = import_mtbench([DATA / "human.jsonl"], run="all", with_authors=True)
    assert with_authors.labels == len(current_labels(EvidenceLog("runs/all"))) == 3355
    expected = Counter(
        (f"q{r['question_id']}-t{r['turn']}", *sorted((r["model_a"], r["model_b"]))) for r in rows
    )
    got = Counter(k[:3] for k in current_labels(EvidenceLog("runs/all")))
    assert got == expected


def conversation(question: int, model: str) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"Question {question}, first message?"},
        {"role": "assistant", "content": f"{model} answers {question}.1" + "!" * len(model)},
        {"role": "user", "content": f"Question {question}, follow-up?"},
        {"role": "assistant", "content": f"{model} answers {question}.2"},
    ]


def hf_rows() -> list[dict[str, Any]]:
    """Rows in the Hugging Face form: every pair, both turns, two questions, three models."""
    models = ["alpaca-13b", "gpt-4", "vicuna-13b"]
    rows = []
    for question in (81, 82):
        for turn in (1, 2):
            for k, a in enumerate(models):
                for b in models[k + 1 :]:
                    gpt4_winner = {"gpt-4": "model_a"}.get(a, "tie (inconsistent)")
                    if b == "gpt-4":
                        gpt4_winner = "model_b"
                    for judge, winner in (
                        ("gpt4_pair", gpt4_winner),
                        # the expert's rows name the pair the other way round
                        ("expert_1", "model_a" if b == "gpt-4" else "model_b"),
                        ("author_0", "tie"),
                    ):
                        rows.append(
                            {
                                "question_id": question,
                                "model_a": b if judge == "expert_1" else a,
                                "model_b": a if judge == "expert_1" else b,
                                "winner": winner,
                                "judge": judge,
                                "turn": turn,
                                "conversation_a": conversation(question, a),
                                "conversation_b": conversation(question, b),
                            }
                        )
    # expert_1 votes q81 turn 1 alpaca vs gpt-4 a second time: both votes must survive
    again = dict(rows[1])
    again["winner"] = "tie"
    rows.append(again)
    return rows


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_hugging_face_rows_bring_answers_a_new_judge_can_judge(project: Path) -> None:
    from konkord.providers.llm import ModelClient
    from konkord.stages.judge.judge import judge_run

    path = write_jsonl(project / "hf.jsonl", hf_rows())
    summary = import_mtbench([path], run="hf")
    assert summary.answers == 2 * 2 * 3 and summary.labels == 13
    spec = resolve_run("hf")
    assert spec.models == ("alpaca-13b", "gpt-4", "vicuna-13b")
    assert spec.suite.task("q81-t1").prompt == "Question 81, first message?"
    turn2 = spec.suite.task("q81-t2").prompt
    assert "Question 81, first message?" in turn2 and "Question 81, follow-up?" in turn2
    log = EvidenceLog(spec.run_dir)
    answers = current_answers(log, spec.suite, spec.settings)
    assert answers[("q82-t1", "gpt-4")]["text"] == "gpt-4 answers 82.1!!!!!"
    assert answers[("q82-t2", "gpt-4")]["text"].endswith(
        "Reply to the second message:\n\ngpt-4 answers 82.2"
    )
    labels = current_labels(log)
    assert labels[("q81-t1", "alpaca-13b", "gpt-4", "expert_1")]["winner"] == "gpt-4"
    assert labels[("q81-t1", "alpaca-13b", "gpt-4", "expert_1#2")]["winner"] == "tie"
    # the imported verdicts were made on exactly these answers, so none is stale
    fresh = load_verdicts(log, JUDGE, answer_shas=answer_shas(good_answers(spec, log)))
    assert len(fresh) == 2 * 4 * 3
    run = asyncio.run(judge_run(spec, ["sim-judge/fair"], ModelClient(cache_dir=None)))
    assert run.tallies["sim-judge/fair"].failed == 0
    assert len(load_verdicts(log, "sim-judge/fair")) == 2 * 4 * 3
    results = build_results(spec, ReportOptions(resamples=20))
    results_path = spec.results_path
    results_path.parent.mkdir(parents=True, exist_ok=True)
    from konkord.results.schema import write_results

    write_results(results, results_path)
    blocks = calibrate_run(spec, echo=lambda _: None)
    assert set(blocks) == {JUDGE, "sim-judge/fair"}
    gpt4 = blocks[JUDGE]
    # expert_1 agrees with gpt4_pair on the gpt-4 pairs (8 labels + 1 repeated tie vote that
    # disagrees); on alpaca vs vicuna gpt4 flipped (tie) and the expert chose: 4 disagree
    assert gpt4.agreement is not None and (gpt4.agreement.k, gpt4.agreement.n) == (8, 13)
    assert gpt4.flip_rate is not None and gpt4.flip_rate.rate == pytest.approx(4 / 12)
    assert [q.key for q in gpt4.by_length_quartile]
    assert [g.key for g in gpt4.by_turn] == ["turn 1", "turn 2"]


def test_parquet_rows_import_like_jsonl(project: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    parquet = pytest.importorskip("pyarrow.parquet")
    rows = hf_rows()
    parquet.write_table(pa.Table.from_pylist(rows), project / "hf.parquet")
    from_parquet = import_mtbench([project / "hf.parquet"], run="pq")
    from_jsonl = import_mtbench([write_jsonl(project / "hf.jsonl", rows)], run="js")
    assert replace(from_parquet, run="js", suite_path=from_jsonl.suite_path) == from_jsonl

    def winners(run: str) -> dict[tuple[str, ...], str]:
        return {k: r["winner"] for k, r in current_labels(EvidenceLog(f"runs/{run}")).items()}

    assert winners("pq") == winners("js")
    texts = {
        run: {
            k: r["text"]
            for k, r in current_answers(
                EvidenceLog(f"runs/{run}"), spec.suite, spec.settings
            ).items()
        }
        for run, spec in (("pq", resolve_run("pq")), ("js", resolve_run("js")))
    }
    assert texts["pq"] == texts["js"]


def test_a_bad_winner_names_the_file_and_line(project: Path) -> None:
    row = {"judge": "expert_1", "model_a": "x", "model_b": "y", "question_id": 81, "turn": 1}
    path = write_jsonl(
        project / "bad.jsonl", [{**row, "winner": "model_a"}, {**row, "winner": "b"}]
    )
    with pytest.raises(KonkordError, match=r'bad.jsonl:2: winner "b" is not one of model_a'):
        import_mtbench([path])


def test_a_row_of_another_dataset_is_refused(project: Path) -> None:
    path = write_jsonl(project / "other.jsonl", [{"prompt": "hi", "winner": "model_a"}])
    with pytest.raises(KonkordError, match=r"other.jsonl:1: not an MT-Bench judgment row"):
        import_mtbench([path])


def test_the_same_votes_in_both_forms_are_refused(project: Path) -> None:
    rows = hf_rows()
    full = write_jsonl(project / "hf.jsonl", rows)
    bare = write_jsonl(
        project / "labels.jsonl",
        [{k: v for k, v in r.items() if not k.startswith("conversation")} for r in rows],
    )
    with pytest.raises(KonkordError, match="hold the same votes; give one form of each"):
        import_mtbench([full, bare])


def test_importing_twice_into_one_run_is_refused(project: Path) -> None:
    path = write_jsonl(project / "hf.jsonl", hf_rows())
    import_mtbench([path], run="once")
    out = CliRunner().invoke(cli, ["import", "mt-bench-human", str(path), "--run", "once"])
    assert out.exit_code == 2
    assert 'run "once" already has evidence in runs/once' in out.output


def test_an_import_into_a_run_another_process_holds_is_refused_and_writes_nothing(
    project: Path,
) -> None:
    """Two imports into one new run at once would both pass the "already has evidence" check:
    the import holds the run's writer lock like every stage that writes evidence."""
    import threading

    from konkord.evidence.stopping import RunBusy, run_lock

    path = write_jsonl(project / "hf.jsonl", hf_rows())
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:  # another writer (a thread has its own lock, as a process does)
        with run_lock(Path("runs") / "both", "import"):
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(30)
        with pytest.raises(RunBusy, match="konkord import"):
            import_mtbench([path], run="both")
        assert not (project / "suites" / "both.yaml").exists()
        assert not (project / "runs" / "both" / "answers.jsonl").exists()
    finally:
        release.set()
        holder.join()
    assert import_mtbench([path], run="both").answers == 2 * 2 * 3  # free again: it imports


def test_an_import_stays_inside_the_project(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = write_jsonl(project / "hf.jsonl", hf_rows())
    outside = tmp_path_factory.mktemp("outside")

    def import_error(run: str) -> str:
        out = CliRunner().invoke(cli, ["import", "mt-bench-human", str(path), "--run", run])
        assert out.exit_code == 2
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        return out.stderr.strip()

    assert import_error("../away") == (
        "error: --run: run name \"../away\" is not a slug (use lower case, digits, '-', '_' or "
        "'.')"
    )
    (outside / "runs").mkdir()
    os.symlink(outside / "runs", project / "runs")
    assert import_error("mtb").startswith(
        'error: the run folder "runs/mtb" is outside the project folder (through a symlink'
    )
    (project / "runs").unlink()
    (outside / "suites").mkdir()
    os.symlink(outside / "suites", project / "suites")
    assert import_error("mtb").startswith(
        'error: the suite file "suites/mtb.yaml" is outside the project folder (through a symlink'
    )
    assert not list(outside.rglob("*.*")) and not (project / "runs").exists()


def test_an_import_of_a_device_a_fifo_or_a_folder_is_one_line(project: Path) -> None:
    """Issue 24: /dev/zero ran out of memory and a FIFO blocked forever; imports follow the
    suites' rules (a regular file of bounded size)."""
    os.mkfifo(project / "pipe.jsonl")
    (project / "folder.jsonl").mkdir()
    expected = {
        "/dev/zero": "error: /dev/zero: is a device, expected a regular file",
        "pipe.jsonl": "error: pipe.jsonl: is a named pipe (FIFO), expected a regular file",
        "folder.jsonl": "error: folder.jsonl: is a directory, expected a file",
        "missing.jsonl": "error: missing.jsonl: file not found",
    }
    for path, message in expected.items():
        out = CliRunner().invoke(cli, ["import", "mt-bench-human", path, "--run", "mtb"])
        assert out.exit_code == 2, out.output
        assert out.stderr.strip() == message
    assert not (project / "runs").exists()
