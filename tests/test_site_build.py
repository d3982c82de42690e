"""`konkord build`: runs.json checked against results/ both ways, and incremental rewriting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fixtures_site import make_results, write_project

from konkord.cli import cli
from konkord.errors import KonkordError
from konkord.results.schema import Results, write_results
from konkord.stages.build.build import BuildSummary, build_site

RUNS = Path("runs.json")
OUT = Path("public")


def small_runs() -> list[Results]:
    return [
        make_results("one", models=["m/a", "m/b", "m/c"], judges=["j/x"], n_tasks=3),
        make_results("two", models=["m/a", "m/d"], judges=["j/x", "j/y"], n_tasks=2),
    ]


@pytest.fixture
def consistent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write_project(tmp_path, small_runs())
    monkeypatch.chdir(tmp_path)
    return tmp_path


def edit_runs(root: Path, change: dict[str, object], run: int = 0) -> None:
    data = json.loads((root / "runs.json").read_text())
    data["runs"][run].update(change)
    (root / "runs.json").write_text(json.dumps(data, indent=2))


def build_error(capsys: pytest.CaptureFixture[str] | None = None) -> str:
    with pytest.raises(KonkordError) as info:
        build_site(OUT, offline=True, runs_file=RUNS)
    return str(info.value)


def snapshot(out: Path) -> dict[str, tuple[int, bytes]]:
    return {
        p.relative_to(out).as_posix(): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(out.rglob("*"))
        if p.is_file()
    }


def changed(before: dict[str, tuple[int, bytes]], after: dict[str, tuple[int, bytes]]) -> set[str]:
    return {path for path in after if path not in before or before[path][0] != after[path][0]}


def test_a_consistent_set_builds(consistent: Path) -> None:
    summary = build_site(OUT, offline=True, runs_file=RUNS)
    assert summary.runs == ["one", "two"]
    assert (consistent / "public/one/tasks/task-003/index.html").is_file()
    assert (consistent / "public/two/calibration/index.html").is_file()


def test_listed_run_without_results_file(consistent: Path) -> None:
    (consistent / "results/two.json").unlink()
    message = build_error()
    assert 'results/two.json: missing, but runs.json lists run "two"' in message
    assert "konkord report --run two" in message


def warnings(summary: BuildSummary) -> list[str]:
    return [note for note in summary.notes if note.startswith("warning:")]


def test_an_unlisted_results_file_whose_run_can_be_published_names_publish_and_it_works(
    consistent: Path,
) -> None:
    stray = make_results("stray", models=["m/a", "m/b"], judges=["j/x"], n_tasks=1)
    write_project(consistent / "scratch", [stray], templates=False)
    (consistent / "suites").mkdir(exist_ok=True)
    (consistent / stray.suite.path).write_text((consistent / "scratch" / stray.suite.path).read_text())
    write_results(stray, consistent / "results/stray.json")
    (consistent / "runs/stray").mkdir(parents=True)
    manifest = {"name": "stray", "suite": stray.suite.path, "models": ["m/a", "m/b"], "judges": ["j/x"]}
    (consistent / "runs/stray/run.json").write_text(json.dumps(manifest))
    summary = build_site(OUT, offline=True, runs_file=RUNS)
    assert summary.runs == ["one", "two"]
    assert warnings(summary) == [
        "warning: results/stray.json: not on the site, as runs.json does not list it; "
        "to publish it run `konkord publish stray`"
    ]
    # The advice, followed, settles it: the run is on the site and the warning is gone.
    assert CliRunner().invoke(cli, ["publish", "stray"]).exit_code == 0
    summary = build_site(OUT, offline=True, runs_file=RUNS)
    assert summary.runs == ["one", "two", "stray"] and warnings(summary) == []


def test_an_unlisted_copy_of_a_listed_run_says_to_delete_it_or_point_the_entry_at_it(
    consistent: Path,
) -> None:
    (consistent / "results/two-copy.json").write_bytes((consistent / "results/two.json").read_bytes())
    summary = build_site(OUT, offline=True, runs_file=RUNS)
    assert warnings(summary) == [
        'warning: results/two-copy.json: not on the site, though its run "two" is in runs.json, '
        'with results results/two.json: delete this copy, or set "results": '
        '"results/two-copy.json" in that entry'
    ]
    # `konkord publish two` would answer "already listed": it is not what the warning says.
    assert "publish" not in warnings(summary)[0]
    edit_runs(consistent, {"results": "results/two-copy.json"}, run=1)
    (consistent / "results/two.json").unlink()
    assert warnings(build_site(OUT, offline=True, runs_file=RUNS)) == []


def test_an_unlisted_results_file_of_no_known_run_says_to_remove_it(consistent: Path) -> None:
    write_results(make_results("nope", n_tasks=1), consistent / "results/nope.json")
    (consistent / "results/notes.json").write_text("[1, 2]")
    summary = build_site(OUT, offline=True, runs_file=RUNS)
    assert warnings(summary) == [
        'warning: results/nope.json: not on the site, as runs.json does not list its run "nope", '
        "which has no runs/nope/run.json to publish it from; delete it or move it out of results/",
        "warning: results/notes.json: not on the site, and not a results file konkord can read; "
        "move it out of results/",
    ]


def test_suite_differs(consistent: Path) -> None:
    (consistent / "suites/other.yaml").write_text((consistent / "suites/one.yaml").read_text())
    edit_runs(consistent, {"suite": "suites/other.yaml"})
    message = build_error()
    assert 'results/one.json: run "one": its suite is suites/one.yaml, runs.json says ' in message
    assert "konkord report --run one" in message


def test_models_differ(consistent: Path) -> None:
    edit_runs(consistent, {"models": ["m/a", "m/b", "m/z"]})
    message = build_error()
    assert 'results/one.json: run "one": models differ' in message
    assert "only in the results file: m/c; only in runs.json: m/z" in message


def test_judges_differ(consistent: Path) -> None:
    edit_runs(consistent, {"judges": ["j/x"]}, run=1)
    message = build_error()
    assert 'results/two.json: run "two": judges differ' in message
    assert "only in the results file: j/y; only in runs.json: none" in message


def test_unreadable_schema_version(consistent: Path) -> None:
    path = consistent / "results/one.json"
    data = json.loads(path.read_text())
    data["schema_version"] = 99
    path.write_text(json.dumps(data))
    message = build_error()
    assert "results/one.json: schema version 99, but this konkord reads version 1" in message
    assert "konkord report --run one" in message


def test_all_problems_are_reported_together(consistent: Path) -> None:
    (consistent / "results/two.json").unlink()
    edit_runs(consistent, {"models": ["m/a", "m/b"]})
    message = build_error()
    assert "2 problems" in message
    assert "results/two.json: missing" in message and "models differ" in message
    assert not (consistent / "public").exists(), "nothing is written when the inputs disagree"


def test_cli_prints_the_error_and_exits_2(consistent: Path) -> None:
    (consistent / "results/two.json").unlink()
    result = CliRunner().invoke(cli, ["build", "--offline"])
    assert result.exit_code == 2
    assert "results/two.json: missing" in result.output


def test_cli_prints_a_line_per_run_and_a_summary(consistent: Path) -> None:
    result = CliRunner().invoke(cli, ["build", "--offline"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("run one: 8 pages")
    assert lines[1].startswith("run two: 7 pages")
    assert lines[-1].startswith("built public/: 2 runs,")


def test_missing_results_note_names_the_run_and_what_is_missing(consistent: Path) -> None:
    (consistent / "results/two.json").unlink()
    lines: list[str] = []
    with pytest.raises(KonkordError):
        build_site(OUT, offline=True, runs_file=RUNS, progress=lines.append)
    assert any(
        line.startswith("offline, no model called: run two: results/two.json is missing")
        and "answers 0 of 4 present" in line
        for line in lines
    ), lines


def test_no_change_rebuild_rewrites_nothing(consistent: Path) -> None:
    build_site(OUT, offline=True, runs_file=RUNS)
    before = snapshot(consistent / "public")
    summary = build_site(OUT, offline=True, runs_file=RUNS)
    assert summary.written == []
    assert changed(before, snapshot(consistent / "public")) == set()


def test_one_template_change_rewrites_only_its_pages(consistent: Path) -> None:
    build_site(OUT, offline=True, runs_file=RUNS)
    before = snapshot(consistent / "public")
    template = consistent / "templates/task.html"
    template.write_text(template.read_text().replace("All tasks", "Every task"))
    build_site(OUT, offline=True, runs_file=RUNS)
    rewritten = changed(before, snapshot(consistent / "public"))
    task_pages = {p for p in before if "/tasks/task-" in p}
    assert rewritten == task_pages | {".konkord-build.json"}
    assert "Every task" in (consistent / "public/one/tasks/task-001/index.html").read_text()


def test_shared_template_change_rewrites_the_pages_that_include_it(consistent: Path) -> None:
    build_site(OUT, offline=True, runs_file=RUNS)
    before = snapshot(consistent / "public")
    macros = consistent / "templates/_macros.html"
    macros.write_text(macros.read_text().replace("calibrated against", "calibrated with"))
    build_site(OUT, offline=True, runs_file=RUNS)
    rewritten = changed(before, snapshot(consistent / "public"))
    # The badge is drawn by a macro that the leaderboard and calibration templates import;
    # the tasks index and the site-wide pages do not import it.
    assert {"one/index.html", "one/calibration/index.html"} <= rewritten
    assert "two/index.html" in rewritten
    assert not rewritten & {"index.html", "404.html", "one/tasks/index.html"}


def test_one_results_change_rewrites_only_that_runs_pages(consistent: Path) -> None:
    build_site(OUT, offline=True, runs_file=RUNS)
    before = snapshot(consistent / "public")
    changed_run = make_results(
        "two", models=["m/a", "m/d"], judges=["j/x", "j/y"], n_tasks=2, date="2026-11-28"
    )
    write_results(changed_run, consistent / "results/two.json")
    build_site(OUT, offline=True, runs_file=RUNS)
    rewritten = changed(before, snapshot(consistent / "public"))
    assert rewritten, "the changed run was rebuilt"
    assert all(
        p.startswith("two/") or p in {"results/two.json", "index.html", ".konkord-build.json"}
        for p in rewritten
    ), rewritten
    # The runs index shows the new date, so it changes too; no page of run one does.
    assert not [p for p in rewritten if p.startswith("one/")]


def test_removed_run_pages_are_removed(consistent: Path) -> None:
    build_site(OUT, offline=True, runs_file=RUNS)
    data = json.loads((consistent / "runs.json").read_text())
    data["runs"] = data["runs"][:1]
    (consistent / "runs.json").write_text(json.dumps(data))
    (consistent / "results/two.json").unlink()
    summary = build_site(OUT, offline=True, runs_file=RUNS)
    assert "two/index.html" in summary.removed
    assert not (consistent / "public/two").exists()
    assert not (consistent / "public/results/two.json").exists()
    assert (consistent / "public/one/index.html").is_file()


def test_two_builds_of_the_same_inputs_are_byte_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trees = []
    for name in ("first", "second"):
        root = tmp_path / name
        root.mkdir()
        write_project(root, small_runs())
        monkeypatch.chdir(root)
        build_site(OUT, offline=True, runs_file=RUNS)
        trees.append({k: v[1] for k, v in snapshot(root / "public").items()})
    assert trees[0] == trees[1]
    assert len(trees[0]) > 10


def test_deleted_output_is_rewritten(consistent: Path) -> None:
    build_site(OUT, offline=True, runs_file=RUNS)
    (consistent / "public/one/index.html").unlink()
    summary = build_site(OUT, offline=True, runs_file=RUNS)
    assert summary.written == ["one/index.html"]


def test_broken_template_is_a_clear_error(consistent: Path) -> None:
    (consistent / "templates/tasks.html").write_text("{% block nope %}")
    message = build_error()
    assert "templates/tasks.html:1: TemplateSyntaxError" in message


def test_reserved_run_name(consistent: Path) -> None:
    edit_runs(consistent, {"name": "static"})
    assert 'run name "static" is reserved' in build_error()


def test_parallel_build_writes_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import konkord.site.parallel as build_module

    trees = []
    for name, workers in (("inline", "1"), ("parallel", "2")):
        root = tmp_path / name
        root.mkdir()
        write_project(root, small_runs())
        monkeypatch.chdir(root)
        monkeypatch.setenv("KONKORD_BUILD_WORKERS", workers)
        monkeypatch.setattr(build_module, "PARALLEL_MIN_TASKS", 1)
        lines: list[str] = []
        build_site(OUT, offline=True, runs_file=RUNS, progress=lines.append)
        assert lines[:2] == ["run one: 8 pages, 8 written", "run two: 7 pages, 7 written"]
        trees.append({k: v[1] for k, v in snapshot(root / "public").items()})
    assert trees[0] == trees[1]


@pytest.mark.parametrize(
    ("task_files", "ahead"),
    [(False, False), (True, False), (False, True), (True, True)],
    ids=["inline", "task-files", "inline-ahead", "task-files-ahead"],
)
def test_a_run_split_into_task_slices_writes_the_same_site(
    task_files: bool, ahead: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One large run (fewer runs than workers) is rendered in slices of its tasks by two worker
    processes while this process renders its own pages: the same files in the same bytes, the
    same manifest and the same progress line as one process; a run too small to split beside
    it still renders whole in a worker. Would catch a slice losing or repeating a task page,
    a task index in another order or missing rows, a folded task's second page, a results
    copy, or the manifest's page list left out. With `ahead`, the results files are newer
    than their inputs, so the slices start before the check (and are used: it changes
    nothing)."""
    import os

    import konkord.results.files as results_files
    import konkord.site.parallel as parallel
    import konkord.stages.build.build as build_module

    started: list[object] = []

    def spy(*args: Any) -> Any:
        found = parallel.render_ahead(*args)
        started.append(found)
        return found

    monkeypatch.setattr(build_module, "render_ahead", spy)

    if task_files:  # a large run's tasks in a file each, read one at a time in each worker
        monkeypatch.setattr(results_files, "INLINE_TASKS_MAX", 0)
    models = [f"m/model-{k}" for k in range(9)]  # 36 pairs: every task page is folded
    runs = [
        make_results("big", models=models, judges=["j/x", "j/y"], n_tasks=11),
        make_results("small", models=["m/a", "m/b"], judges=["j/x"], n_tasks=2),
    ]
    trees, lines, manifests = [], [], []
    for name, workers in (("inline", "1"), ("split", "2")):
        root = tmp_path / name
        root.mkdir()
        write_project(root, runs)
        if ahead:  # written after runs.json and the suites, as `konkord report` writes them
            for path in (root / "results").glob("*.json"):
                later = path.stat().st_mtime_ns + 10**9
                os.utime(path, ns=(later, later))
        monkeypatch.chdir(root)
        monkeypatch.setenv("KONKORD_BUILD_WORKERS", workers)
        monkeypatch.setattr(parallel, "PARALLEL_MIN_TASKS", 1)
        monkeypatch.setattr(parallel, "SPLIT_MIN_TASKS", 5)
        said: list[str] = []
        build_site(OUT, offline=True, runs_file=RUNS, progress=said.append)
        trees.append({k: v[1] for k, v in snapshot(root / "public").items()})
        lines.append(said[:2])
        manifests.append(json.loads((root / "public/.konkord-build.json").read_text()))
    assert lines[0] == lines[1] == ["run big: 27 pages, 27 written", "run small: 7 pages, 7 written"]
    assert trees[0] == trees[1]
    assert manifests[0] == manifests[1]
    assert (started != [] and started[-1] is not None) == ahead  # the split build's head start
    assert "big/tasks/task-011/verdicts/index.html" in trees[1]
    assert any(path.startswith("results/big") for path in trees[1])


def test_ctrl_c_while_workers_render_slices_leaves_the_site_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C reaching the build while worker processes render a run's slices: the previous
    site stays byte for byte, with no staging folder and no temporary file left beside it.
    Would catch a pool left running into a removed staging folder, or pages written in place."""
    import multiprocessing

    import konkord.site.parallel as parallel

    models = [f"m/model-{k}" for k in range(9)]
    write_project(tmp_path, [make_results("big", models=models, judges=["j/x"], n_tasks=9)])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KONKORD_BUILD_WORKERS", "1")
    build_site(OUT, offline=True, runs_file=RUNS)
    before = snapshot(tmp_path / "public")
    base = tmp_path / "templates/base.html"  # every page is out of date: all re-render
    base.write_text(base.read_text().replace("</body>", "<!-- edited --></body>"))
    monkeypatch.setenv("KONKORD_BUILD_WORKERS", "2")
    monkeypatch.setattr(parallel, "PARALLEL_MIN_TASKS", 1)
    monkeypatch.setattr(parallel, "SPLIT_MIN_TASKS", 1)

    def interrupted(*_args: object) -> None:
        raise KeyboardInterrupt  # in this process, while the workers render the slices

    monkeypatch.setattr(parallel, "copy_results", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_site(OUT, offline=True, runs_file=RUNS)
    assert multiprocessing.active_children() == [], "no worker outlives the build"
    assert snapshot(tmp_path / "public") == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".public")) == []
    assert not [p for p in (tmp_path / "public").rglob("*.tmp")]


@pytest.mark.parametrize("task_files", [False, True], ids=["inline", "task-files"])
def test_pages_rendered_before_the_check_from_a_file_it_replaces_are_all_thrown_away(
    task_files: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Task pages start rendering from the results file as it is while the build checks the
    run's evidence; here the check replaces that file (with the very file the previous build
    rendered). The site must be exactly the previous build's: no page of the replaced file
    (nor of its extra task) kept, none skipped as current because the previous build wrote it
    from the same inputs. Would catch the head start's pages being used, left behind, or
    trusted through the previous manifest."""
    import time

    import konkord.results.files as results_files
    import konkord.site.parallel as parallel
    import konkord.stages.build.build as build_module

    if task_files:
        monkeypatch.setattr(results_files, "INLINE_TASKS_MAX", 0)
    models = [f"m/model-{k}" for k in range(9)]
    first = make_results("big", models=models, judges=["j/x"], n_tasks=9)
    other = make_results("big", models=models, judges=["j/x"], n_tasks=10, seed=1)
    write_project(tmp_path, [first])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KONKORD_BUILD_WORKERS", "1")
    build_site(OUT, offline=True, runs_file=RUNS)
    before = snapshot(tmp_path / "public")
    write_results(other, Path("results/big.json"))
    monkeypatch.setenv("KONKORD_BUILD_WORKERS", "2")
    monkeypatch.setattr(parallel, "PARALLEL_MIN_TASKS", 1)
    monkeypatch.setattr(parallel, "SPLIT_MIN_TASKS", 1)
    seen: list[bool] = []

    def check_that_replaces_the_file(spec: object, offline: bool) -> list[str]:
        # wait until the head start has written the replaced file's last task page
        for _ in range(600):
            if list(tmp_path.glob(".public.building-*/big/tasks/task-010/index.html")):
                seen.append(True)
                break
            time.sleep(0.1)
        write_results(first, Path("results/big.json"))
        return []

    monkeypatch.setattr(build_module, "ensure_stages", check_that_replaces_the_file)
    build_site(OUT, offline=True, runs_file=RUNS)
    assert seen, "the head start rendered the replaced file's pages"
    after = snapshot(tmp_path / "public")
    assert {k: v[1] for k, v in after.items()} == {k: v[1] for k, v in before.items()}


def test_slices_cover_every_task_once_in_order() -> None:
    from konkord.site.parallel import slices

    for count in (0, 1, 7, 8, 1000):
        for parts in (1, 3, 8, 50):
            cut = slices(count, parts)
            assert [i for part in cut for i in part] == list(range(count))
            assert len(cut) <= max(1, parts)
            assert all(len(part) for part in cut) or count == 0
            assert max(map(len, cut)) - min(map(len, cut)) <= 1


def test_invalid_results_file_names_the_field(consistent: Path) -> None:
    path = consistent / "results/one.json"
    data = json.loads(path.read_text())
    del data["judge_blocks"]
    path.write_text(json.dumps(data))
    message = build_error()
    assert "results/one.json: invalid results file at judge_blocks: Field required" in message


def test_fast_summary_matches_the_validated_one() -> None:
    from konkord.site.render import RunSummary

    results = make_results("one", n_tasks=2)
    raw = json.loads(results.model_dump_json())
    assert RunSummary.from_data(raw) == RunSummary.of(results)


def test_summary_from_the_files_bytes_matches_the_validated_one() -> None:
    from konkord.site.render import RunSummary

    for results in (make_results("one", n_tasks=2), make_results("none", judges=[], n_tasks=1)):
        data = results.model_dump_json().encode()
        assert RunSummary.from_results_json(data) == RunSummary.of(results)


def test_task_id_that_cannot_be_a_folder_is_refused(consistent: Path) -> None:
    path = consistent / "results/one.json"
    data = json.loads(path.read_text())
    data["tasks"][0]["id"] = "../escape"
    path.write_text(json.dumps(data))
    message = build_error()
    assert 'results/one.json: task id "../escape" cannot be a page name' in message
    assert not (consistent / "escape").exists()


def test_a_failed_build_leaves_the_previous_site_as_it_was(consistent: Path) -> None:
    build_site(OUT, offline=True, runs_file=RUNS)
    before = snapshot(consistent / OUT)
    # A template that breaks after others were rendered: the runs index, rendered first of the
    # site-wide pages, changed; the 404 page, rendered last, fails.
    (consistent / "templates/index.html").write_text("changed\n")
    missing = consistent / "templates/404.html"
    missing.write_text(missing.read_text() + "{% if %}")
    with pytest.raises(KonkordError, match=r"404\.html"):
        build_site(OUT, offline=True, runs_file=RUNS)
    assert snapshot(consistent / OUT) == before
    assert [p.name for p in consistent.iterdir() if p.name.startswith(".public")] == []


def test_a_first_build_that_fails_leaves_no_site_behind(consistent: Path) -> None:
    task = consistent / "templates/task.html"
    task.write_text(task.read_text() + "{% if %}")
    with pytest.raises(KonkordError):
        build_site(OUT, offline=True, runs_file=RUNS)
    assert not (consistent / OUT).exists()
    assert [p.name for p in consistent.iterdir() if p.name.startswith(".public")] == []
