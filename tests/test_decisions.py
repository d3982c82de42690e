"""The run's one view of who decided what (`konkord.stages.decisions`), its one cost rule, and
what every reader of it shows: the judges table's rows for a cascade, its strong judge alone
and its first pass; the runs index; the cascade against the strong judge alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_cascade import CHEAP, STRONG, cascade, write_answers, write_project
from test_cascade import responder as cascade_responder

from konkord.cli import cli
from konkord.configuration.runs_config import Price
from konkord.configuration.runspec import RunSpec, resolve_run
from konkord.evidence.log import EvidenceLog, now_iso
from konkord.results.judges_table import judge_table
from konkord.results.schema import Results, read_results
from konkord.stages.decisions import call_cost, cascade_name, cost_of, decide
from konkord.stages.judge.cascade_view import CascadePlan
from konkord.stages.report.judges_print import format_judge_table
from konkord.stages.report.report import build_results
from konkord.stages.report.report_ranking import ReportOptions

REPO = Path(__file__).resolve().parent.parent
DEMO = "demo-support-replies"


# ---- the pure view -----------------------------------------------------------------------


def _verdict(task: str, order: str, judge: str, winner: str, **extra: Any) -> dict[str, Any]:
    position = {"a": "1" if order == "ab" else "2", "b": "2" if order == "ab" else "1"}
    return {
        "kind": "verdict",
        "task_id": task,
        "model_a": "a",
        "model_b": "b",
        "order": order,
        "judge": judge,
        "winner": winner,
        "position_winner": position.get(winner, "tie"),
        "answer_a_sha": "x",
        "answer_b_sha": "y",
        **extra,
    }


def _first(task: str, winner: str, sure: float) -> list[dict[str, Any]]:
    """Both orders of the first pass, `sure` of its probability on `winner` in each."""
    out = []
    for order in ("ab", "ba"):
        shown = {"a": "1" if order == "ab" else "2", "b": "2" if order == "ab" else "1"}[winner]
        other = "2" if shown == "1" else "1"
        probs = {shown: sure, other: (1 - sure) / 2, "tie": (1 - sure) / 2}
        out.append(
            _verdict(task, order, "f", winner, probs=probs, confidence="logprobs", cost_usd=0.001)
        )
    return out


def test_the_view_names_the_cascade_and_says_who_decided_each_pair() -> None:
    first = _first("t1", "a", 0.95) + _first("t2", "a", 0.6)
    strong = [_verdict(t, o, "s", "b", cost_usd=0.01) for t in ("t1", "t2") for o in ("ab", "ba")]
    labels = [
        {"task_id": "t1", "model_a": "a", "model_b": "b", "labeller": "p", "winner": "a"},
        {"task_id": "t2", "model_a": "a", "model_b": "b", "labeller": "p", "winner": "b"},
    ]
    view = decide(["a", "b"], {"f": first, "s": strong}, labels, CascadePlan("f", "s", 0.8))
    assert view.cascade_route == "f -> s at 0.8"
    route = view.routes["f -> s at 0.8"]
    assert route.kind == "cascade"
    assert {k[0]: d.decided_by for k, d in route.decisions.items()} == {"t1": "f", "t2": "s"}
    assert {k[0]: d.winner for k, d in route.decisions.items()} == {"t1": "a", "t2": "b"}
    # The cascade pays for its first pass everywhere and the strong judge on t2 only (the
    # strong judge's verdicts on t1 are its audit, not the cascade's).
    cost = route.cost({})
    assert cost.calls == 4 + 2 and cost.cost_usd == pytest.approx(4 * 0.001 + 2 * 0.01)
    # Agreement counts straight from the view: the cascade 2 of 2, the strong judge alone 1 of 2.
    assert view.agreement("f -> s at 0.8") == (2, 2)
    assert view.agreement("s") == (1, 2)
    assert view.agreement("f") == (1, 2)
    # A judge's own route: one decision per combined verdict, as a read-only mapping.
    alone = view.judge("s").decisions
    assert len(alone) == 2 and ("t1", "a", "b") in alone and ("t1", "b", "a") not in alone
    assert {k: (d.winner, d.decided_by) for k, d in alone.items()} == {
        ("t1", "a", "b"): ("b", "s"),
        ("t2", "a", "b"): ("b", "s"),
    }
    assert alone[("t2", "a", "b")].orders["ba"] == strong[3]
    assert view.routes["people"].kind == "people" and len(view.labels) == 2


def test_cascade_names_are_short() -> None:
    name = cascade_name("sim-judge/quick", "sim-judge/steward:accuracy=0.75,tie_rate=0.1", 0.8)
    assert name == "quick -> steward at 0.8"


def test_one_cost_rule_recorded_else_price_else_unknown() -> None:
    price = Price(input_per_million=3.0, output_per_million=15.0)
    tokens = {"kind": "verdict", "tokens_in": 1000, "tokens_out": 100}
    assert call_cost({**tokens, "cost_usd": 0.5}, "openai/x", price) == 0.5  # recorded wins
    assert call_cost({**tokens, "cost_usd": None}, "openai/x", price) == pytest.approx(0.0045)
    assert call_cost({**tokens, "cost_usd": None}, "openai/x", None) is None  # never $0
    # a simulated model's $0 is a placeholder: the price the run declares replaces it
    assert call_cost({**tokens, "cost_usd": 0.0}, "sim-judge/q", price) == pytest.approx(0.0045)
    assert call_cost({**tokens, "cost_usd": 0.0}, "sim-judge/q", None) == 0.0
    # an imported verdict: no cost, no tokens, no price -> unknown, not free
    imported = cost_of([{"kind": "verdict", "source": "import"}] * 3, "gpt4_pair", None)
    assert imported.calls == 3 and imported.cost_usd is None and imported.unknown_calls == 3
    assert imported.per_1000 is None


# ---- the demo: rows counted again from the evidence --------------------------------------


def _latest(path: Path, keys: tuple[str, ...]) -> dict[tuple[Any, ...], dict[str, Any]]:
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            out[tuple(record.get(k) for k in keys)] = record
    return out


def _spec(item: Any) -> str:
    """A runs.json model or judge as its full spec ({"model": spec, "name": short} or a string)."""
    return str(item["model"]) if isinstance(item, dict) else str(item)


def _display_names(entry: dict[str, Any]) -> dict[str, str]:
    """Full spec -> the short name runs.json gives it."""
    items = [*entry.get("models", []), *entry.get("judges", [])]
    return {i["model"]: i["name"] for i in items if isinstance(i, dict) and "name" in i}


def _plain_specs(entry: dict[str, Any]) -> dict[str, Any]:
    """The runs.json entry with models and judges as plain specs, as the evidence names them."""
    return {
        **entry,
        "names": _display_names(entry),
        "models": [_spec(m) for m in entry.get("models", [])],
        "judges": [_spec(j) for j in entry.get("judges", [])],
    }


@pytest.fixture(scope="module")
def demo() -> tuple[Results, dict[str, Any]]:
    runs = json.loads((REPO / "runs.json").read_text())
    entry = _plain_specs(next(r for r in runs["runs"] if r["name"] == DEMO))
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO)
        results = build_results(resolve_run(DEMO), ReportOptions(resamples=20))
    return results, entry


def _hand_agreement(judge: str) -> tuple[int, int]:
    """The judge's own verdicts against the labels, by plain loops over the JSON lines."""
    run_dir = REPO / "runs" / DEMO
    verdicts = _latest(
        run_dir / "verdicts.jsonl", ("task_id", "model_a", "model_b", "order", "judge")
    )
    labels = _latest(run_dir / "labels.jsonl", ("task_id", "model_a", "model_b", "labeller"))
    agree = total = 0
    for (task, a, b, _), label in labels.items():
        ab, ba = verdicts[(task, a, b, "ab", judge)], verdicts[(task, a, b, "ba", judge)]
        mine = ab["winner"] if ab["winner"] == ba["winner"] else "tie"
        total += 1
        agree += mine == label["winner"]
    return agree, total


def test_demo_rows_strong_alone_cascade_and_first_pass(
    demo: tuple[Results, dict[str, Any]],
) -> None:
    results, entry = demo
    strong, first = entry["judges"][0], entry["cascade"]["first_pass"]
    rows = {row.judge: row for row in judge_table(results).rows}
    cascade_row = rows["quick -> steward at 0.8"]
    assert cascade_row.role == "cascade" and cascade_row.has_block
    strong_row, first_row = rows[strong], rows[first]
    assert strong_row.role == "strong_alone" and first_row.role == "first_pass"
    # the strong judge's row is its own verdicts only: 48 of 60, not the cascade's 50 of 60
    assert strong_row.people is not None and cascade_row.people is not None
    assert (strong_row.people.k, strong_row.people.n) == _hand_agreement(strong) == (48, 60)
    assert (cascade_row.people.k, cascade_row.people.n) == (50, 60)
    assert first_row.people is not None
    assert (first_row.people.k, first_row.people.n) == _hand_agreement(first)
    assert first_row.people_decided is not None and first_row.people_decided.n < 60
    assert first_row.first_shown.n > 0 and first_row.flip_rate.n == 144


def test_demo_every_cost_figure_is_the_views(demo: tuple[Results, dict[str, Any]]) -> None:
    results, entry = demo
    strong = entry["judges"][0]
    prices = {m: Price(**p) for m, p in entry["prices"].items()}
    costs = {line.who: line for line in results.cost}
    run_dir = REPO / "runs" / DEMO
    steward = [
        r
        for r in _latest(
            run_dir / "verdicts.jsonl", ("task_id", "model_a", "model_b", "order", "judge")
        ).values()
        if r["judge"] == strong
    ]
    by_hand = sum(
        r["tokens_in"] * 3.0 / 1e6 + r["tokens_out"] * 15.0 / 1e6 for r in steward
    )  # the sim records $0; runs.json prices it at $3 / $15 per million
    assert costs[strong].cost_usd == pytest.approx(by_hand, abs=1e-6)
    assert costs[strong].cost_usd == cost_of(steward, strong, prices[strong]).cost_usd
    block = results.block(strong).cascade
    assert block is not None and block.cascade is not None and block.strong_alone is not None
    # the cascade section and the cost line of the cascade are one figure
    assert block.cascade.cost_usd == pytest.approx(costs["quick -> steward at 0.8"].cost_usd)
    assert block.strong_alone.cost_usd == pytest.approx(costs[strong].cost_usd)
    rows = {row.judge: row for row in judge_table(results).rows}
    assert rows[strong].cost_per_1000 == pytest.approx(1000 * by_hand / 288)
    assert rows[strong].cost_per_1000 > 1.0  # was printed as $0.00


def test_runs_index_lists_the_same_rows(demo: tuple[Results, dict[str, Any]]) -> None:
    from konkord.site.summary import RunSummary

    results, entry = demo
    figures = {f["judge"]: f for f in RunSummary.of(results).judge_figures}
    assert figures["quick -> steward at 0.8"]["agreement"] == pytest.approx(50 / 60)
    assert figures[entry["judges"][0]]["agreement"] == pytest.approx(48 / 60)
    assert entry["cascade"]["first_pass"] in figures
    raw = json.loads(results.model_dump_json())
    again = {f["judge"]: f["agreement"] for f in RunSummary.from_data(raw).judge_figures}
    assert again == {k: f["agreement"] for k, f in figures.items()}


def test_judges_command_prints_the_three_rows(demo: tuple[Results, dict[str, Any]]) -> None:
    results, _ = demo
    lines = format_judge_table(DEMO, judge_table(results))
    text = "\n".join(lines)
    assert "J1  quick -> steward at 0.8" in text
    assert "the strong judge of quick -> steward at 0.8, on its own verdicts only" in text
    assert "the first pass of quick -> steward at 0.8" in text
    assert "on the pairs it decided" in text
    assert "$0.00" not in text.split("careful")[0]  # the cascade's judges are priced


# ---- the cascade against the strong judge alone, where both exist ------------------------


@pytest.fixture
def labelled_after(project: Path, openai_server: Any) -> RunSpec:
    """The cascade judged with no label plan, then people label every pair."""
    write_project(project, openai_server.url)
    spec = resolve_run("demo")
    write_answers(spec)
    openai_server.responder = cascade_responder
    cascade(spec)
    log = EvidenceLog(spec.run_dir)
    for task in ("sure", "unsure", "disagree"):
        log.append(
            "labels",
            {
                "kind": "label",
                "task_id": task,
                "model_a": "openai/model-a",
                "model_b": "openai/model-b",
                "labeller": "ana",
                "winner": "openai/model-a",
                "shown_first": "openai/model-a",
                "source": "human",
                "created_at": now_iso(),
            },
        )
    return spec


def test_cascade_is_not_compared_on_escalated_pairs_alone(
    labelled_after: RunSpec, openai_server: Any
) -> None:
    out = CliRunner().invoke(cli, ["calibrate", "--run", "demo"])
    assert out.exit_code == 0, out.output
    block = read_results("results/demo.json").block(STRONG).cascade
    assert block is not None
    # Before: 100% against 100% on the two escalated pairs, and a saving of strong calls.
    assert block.strong_alone is None and block.saved_strong_calls is None
    said = " ".join(out.output.split())
    assert "against the strong judge alone: not measured. 0 labels fall on pairs" in said
    assert "`konkord judge --run demo` has the strong judge judge the labelled pairs" in said
    assert "saving:" not in said
    # The named fix judges the labelled pair the strong judge lacks.
    before = sum(1 for b in openai_server.requests if b["model"] == "strong-judge")
    out = CliRunner().invoke(cli, ["judge", "--run", "demo"])
    assert out.exit_code == 0, out.output
    after = sum(1 for b in openai_server.requests if b["model"] == "strong-judge")
    assert after - before == 2  # the "sure" pair, both orders
    out = CliRunner().invoke(cli, ["calibrate", "--run", "demo"])
    assert "1 labels fall on pairs the first pass decided" in " ".join(out.output.split())
    assert CHEAP in out.output


# ---- judges and calibrate on any run with verdicts ---------------------------------------


def test_judges_computes_what_it_needs(project: Path) -> None:
    for folder in ("suites", f"runs/{DEMO}"):
        shutil.copytree(REPO / folder, project / folder)
    shutil.copy(REPO / "runs.json", project / "runs.json")
    assert not Path(f"results/{DEMO}.json").exists()
    out = CliRunner().invoke(cli, ["judges", "--run", DEMO])
    assert out.exit_code == 0, out.output
    assert "computing it first" in out.output
    assert "J1  quick -> steward at 0.8" in out.output
    assert Path(f"results/{DEMO}.json").exists()


# ---- self-family judging, whatever the source of the verdicts ----------------------------

MTBENCH = REPO.parent / "shared" / "data" / "mtbench_human_judgments"


@pytest.mark.skipif(not (MTBENCH / "human.jsonl").exists(), reason="shared MT-Bench data absent")
def test_imported_mtbench_ranking_names_its_self_family_judge(project: Path) -> None:
    from bs4 import BeautifulSoup

    for folder in ("templates", "content"):
        shutil.copytree(REPO / folder, project / folder)
    runner = CliRunner()
    files = [str(MTBENCH / "human.jsonl"), str(MTBENCH / "gpt4_pair.jsonl")]
    assert runner.invoke(cli, ["import", "mt-bench-human", *files, "--run", "mtb"]).exit_code == 0
    out = runner.invoke(cli, ["publish", "mtb"])
    assert out.exit_code == 0 and "judges: gpt4_pair" in out.output, out.output
    out = runner.invoke(cli, ["build"])
    assert out.exit_code == 0, out.output  # before: "judges differ ... gpt4_pair"
    results = read_results("results/mtb.json")
    (note,) = results.block("gpt4_pair").self_family
    assert note.models == ["gpt-3.5-turbo", "gpt-4"] and note.family == "openai"
    # counted again by hand: every decided comparison with an OpenAI model on either side
    orders = _latest(
        project / "runs" / "mtb" / "verdicts.jsonl",
        ("task_id", "model_a", "model_b", "order", "judge"),
    )
    decided = {
        (t, a, b)
        for (t, a, b, order, judge), r in orders.items()
        if judge == "gpt4_pair"
        and order == "ab"
        and r["kind"] == "verdict"
        and orders.get((t, a, b, "ba", judge), {}).get("kind") == "verdict"
    }
    involved = sum(1 for _, a, b in decided if {a, b} & {"gpt-4", "gpt-3.5-turbo"})
    assert (note.comparisons, note.total) == (involved, len(decided)) and 0 < involved < len(
        decided
    )
    assert {r.model for r in note.ratings_without} == {
        "claude-v1",
        "vicuna-13b-v1.2",
        "alpaca-13b",
        "llama-13b",
    }
    claims = [c.text for c in results.block("gpt4_pair").claims if "gpt-4" in c.models]
    assert claims and all("same provider family" in text for text in claims)
    page = BeautifulSoup((project / "public" / "mtb" / "index.html").read_text(), "html.parser")
    top = page.select_one("section.judge .self-family")
    assert top is not None
    said = " ".join(top.get_text().split())
    assert "gpt4_pair is in the same family as gpt-3.5-turbo, gpt-4 (openai)" in said
    assert f"{involved:,} of its {len(decided):,} comparisons involve its own family" in said
    models = [cell.get_text() for cell in top.select("table.self-family-without td.model")]
    assert models[:1] == ["claude-v1"] and "gpt-4" not in models
    # the judge table, in the terminal and on the Judges page, repeats the caveat
    table = runner.invoke(cli, ["judges", "--run", "mtb"])
    assert table.exit_code == 0, table.output
    assert f"caveat: {note.text}" in table.output
    judges_page = BeautifulSoup(
        (project / "public" / "mtb" / "judges" / "index.html").read_text(), "html.parser"
    )
    caveats = [" ".join(c.get_text().split()) for c in judges_page.select(".self-family-note")]
    assert caveats == [f"caveat: {' '.join(note.text.split())}"]


# ---- the audit sample, said and chosen ---------------------------------------------------


@pytest.mark.parametrize(("audit", "strong_calls"), [(0, 4), (1, 6), (None, 6)])
def test_audit_n_accepted_pairs_are_judged_and_counted(
    project: Path, openai_server: Any, audit: int | None, strong_calls: int
) -> None:
    """Three pairs: "sure" accepted, two escalated. The strong judge also judges N accepted
    pairs (default: the label plan's n, 3 here), and the summary counts them by name."""
    write_project(project, openai_server.url, label_n=3)
    write_answers(resolve_run("demo"))
    openai_server.responder = cascade_responder
    args = ["judge", "--run", "demo"] + ([] if audit is None else ["--audit", str(audit)])
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    strong = [b for b in openai_server.requests if b["model"] == "strong-judge"]
    assert len(strong) == strong_calls
    audited = (strong_calls - 4) // 2
    asked = 3 if audit is None else audit
    said = " ".join(out.output.split())
    assert f"judged 2 escalated + {audited} audited (of {asked} asked" in said


def test_audit_in_runs_json(project: Path, openai_server: Any) -> None:
    write_project(project, openai_server.url, label_n=3)
    runs = json.loads((project / "runs.json").read_text())
    runs["runs"][0]["cascade"]["audit"] = 0
    (project / "runs.json").write_text(json.dumps(runs))
    write_answers(resolve_run("demo"))
    openai_server.responder = cascade_responder
    out = CliRunner().invoke(cli, ["judge", "--run", "demo"])
    assert out.exit_code == 0, out.output
    assert len([b for b in openai_server.requests if b["model"] == "strong-judge"]) == 4


def test_report_prints_the_selective_accuracy_line(project: Path) -> None:
    for folder in ("suites", f"runs/{DEMO}"):
        shutil.copytree(REPO / folder, project / folder)
    shutil.copy(REPO / "runs.json", project / "runs.json")
    out = CliRunner().invoke(cli, ["report", "--run", DEMO, "--resamples", "20"])
    assert out.exit_code == 0, out.output
    said = " ".join(out.output.split())
    assert "cascade quick -> steward at 0.8 agreement with people 83.3%" in said
    # the 0.80 row of the selective table, recounted in test_cascade_demo from the evidence
    assert (
        "selective accuracy at 0.8: the first pass decides 52 of 144 pairs; agreement with "
        "people there 81.5%" in said
    )


def test_dry_run_counts_the_strong_judges_calls_by_name(project: Path, openai_server: Any) -> None:
    write_project(project, openai_server.url, label_n=3)
    write_answers(resolve_run("demo"))
    openai_server.responder = cascade_responder
    fresh = CliRunner().invoke(cli, ["judge", "--run", "demo", "--dry-run"])
    assert fresh.exit_code == 0, fresh.output
    said = " ".join(fresh.output.split())
    assert "3 escalated + 0 audited pairs still to judge" in said  # before the first pass
    assert openai_server.requests == []  # a dry run calls nothing
    out = CliRunner().invoke(cli, ["judge", "--run", "demo", "--audit", "0"])
    assert out.exit_code == 0, out.output
    more = CliRunner().invoke(cli, ["judge", "--run", "demo", "--dry-run", "--audit", "1"])
    assert more.exit_code == 0, more.output
    said = " ".join(more.output.split())
    assert "0 escalated + 1 audited pairs still to judge" in said
    assert "audit: 1 pairs the first pass decided" in said


# ---- the pages read the same view ---------------------------------------------------------


@pytest.fixture(scope="module")
def demo_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from konkord.stages.build.build import build_site

    root = tmp_path_factory.mktemp("decisions-site")
    for folder in ("suites", "runs", "results", "templates", "content"):
        shutil.copytree(REPO / folder, root / folder)
    shutil.copy(REPO / "runs.json", root / "runs.json")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        build_site(Path("public"), offline=True, runs_file=Path("runs.json"))
    return root / "public" / DEMO


def _soup(path: Path) -> Any:
    from bs4 import BeautifulSoup

    return BeautifulSoup(path.read_text(), "html.parser")


def test_pages_show_the_views_rows_and_costs(demo_site: Path) -> None:
    results = read_results(REPO / "results" / f"{DEMO}.json")
    rows = judge_table(results).rows
    page = _soup(demo_site / "judges" / "index.html")
    names = [
        " ".join(th.select_one("code").get_text().split()) for th in page.select("th.judge-name")
    ]
    runs = json.loads((REPO / "runs.json").read_text())
    shown = _display_names(next(r for r in runs["runs"] if r["name"] == DEMO))
    assert [n.split(":")[0] for n in names] == [
        shown.get(r.judge, r.judge).split(":")[0] for r in rows
    ]
    costs = [" ".join(td.get_text().split()) for td in page.select("tbody td.cost")]
    expected = ["unknown" if r.cost_per_1000 is None else f"${r.cost_per_1000:.2f}" for r in rows]
    assert costs == expected and "$6.65" in costs  # the strong judge, priced, was $0.00
    glance = _soup(demo_site / "calibration" / "index.html").select_one("table.glance")
    said = " ".join(glance.get_text().split())
    assert "quick -> steward at 0.8" in said and "the first pass of" in said
    assert "80% (68% to 88%), 48 of 60" in said  # the strong judge alone


def test_task_page_shows_the_first_pass_orders_of_an_escalated_pair(demo_site: Path) -> None:
    results = read_results(REPO / "results" / f"{DEMO}.json")
    escalated = next(
        (task.id, c.cascade.orders_text)
        for task in results.tasks
        for c in task.comparisons
        if c.cascade is not None and c.cascade.decided_by == "strong"
    )
    page = _soup(demo_site / "tasks" / escalated[0] / "index.html")
    shown = [" ".join(s.get_text().split()) for s in page.select("small.first-pass-orders")]
    assert f"First pass, not trusted: {escalated[1]}." in shown
    assert any(text.startswith("First pass, not trusted: order 1: ") for text in shown)
