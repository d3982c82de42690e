"""runs.json: the published runs, validated with one clear message per problem."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from konkord.cli import cli
from konkord.configuration.runs_config import load_runs
from konkord.configuration.runspec import RunSpec, resolve_run, write_manifest
from konkord.configuration.suite import load_suite
from konkord.errors import KonkordError, SuiteError
from konkord.providers.llm import CallSettings

BAD = Path(__file__).parent / "data" / "bad_inputs"

BAD_RUNS: dict[str, str] = {
    "runs_missing_suite.json": "3: runs[0].suite is required",
    "runs_unknown_key.json": '7: runs[0].judgse is not a known field (did you mean "judges"?)',
    "runs_wrong_type.json": "6: runs[0].models should be a list, not text",
    "runs_wrong_type_number.json": (
        "7: runs[0].generation.max_tokens should be a whole number, not text"
    ),
    "runs_duplicate_names.json": '4: runs[1].name "demo" is used twice (first by runs[0])',
    "runs_one_model.json": "3: runs[0].models must list at least two models to compare",
    "runs_suite_not_found.json": (
        '5: runs[0].suite "suites/no_such_suite.yaml" was not found '
        f"(looked for {BAD / 'suites' / 'no_such_suite.yaml'})"
    ),
    "runs_invalid_json.json": "3: invalid JSON (Expecting property name enclosed in double quotes)",
    "runs_empty.json": "1: the file is empty",
    "runs_binary.json": "1: this is a binary file, not text",
    "runs_name_spaces.json": (
        "3: runs[0].name \"my demo\" is not a slug (use lower case, digits, '-', '_' or '.')"
    ),
    "runs_negative_price.json": (
        "8: runs[0].prices.openrouter/acme/small.input_per_million must be at least 0.0"
    ),
    "runs_price_unknown_model.json": (
        '8: runs[0].prices.openrouter/acme/smal "openrouter/acme/smal" is neither a model '
        "nor a judge of this run"
    ),
    "runs_judge_is_model.json": '7: runs[0].judges[0] "sim/alpha" is also a ranked model',
    "runs_top_level_list.json": "1: expected a mapping of fields at the top level",
    "runs_results_escape.json": (
        '4: runs[0].results "../../etc/passwd" is outside the project folder; '
        "use a path inside it"
    ),
    "runs_results_absolute.json": (
        '7: runs[0].results "/etc/passwd" is outside the project folder; use a path inside it'
    ),
    "runs_suite_escape.json": (
        '5: runs[0].suite "../../../../../../../etc/hostname" is outside the project folder; '
        "use a path inside it"
    ),
    "runs_results_folder.json": '7: runs[0].results "ok" is a folder, expected a file',
    "runs_deeply_nested.json": "1: values are nested too deeply",
}


def test_the_corpus_is_all_covered() -> None:
    assert {p.name for p in BAD.glob("*.json")} == set(BAD_RUNS)


@pytest.mark.parametrize("name", sorted(BAD_RUNS))
def test_bad_runs_file_gives_one_clear_error(name: str) -> None:
    path = BAD / name
    with pytest.raises(SuiteError) as caught:
        load_runs(path, check_suites=True)
    assert str(caught.value) == f"{path}:{BAD_RUNS[name]}"


@pytest.mark.parametrize("name", sorted(BAD_RUNS))
def test_validate_exits_non_zero_on_a_bad_runs_file(name: str) -> None:
    path = BAD / name
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {path}:{BAD_RUNS[name]}"


def _write_runs(root: Path, runs: list[dict[str, object]]) -> Path:
    path = root / "runs.json"
    path.write_text(json.dumps({"runs": runs}, indent=2))
    return path


def _write_suite(root: Path, name: str = "tiny") -> Path:
    path = root / "suites" / f"{name}.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        f"name: {name}\nrubric: Prefer correct answers.\ntasks:\n  - id: a\n    prompt: 1+1?\n"
    )
    return path


def test_a_full_entry_loads_with_defaults(tmp_path: Path) -> None:
    _write_suite(tmp_path)
    path = _write_runs(
        tmp_path,
        [
            {
                "name": "demo",
                "suite": "suites/tiny.yaml",
                "models": ["openrouter/acme/small", "sim/beta"],
                "judges": ["sim-judge/fair"],
                "prices": {
                    "openrouter/acme/small": {"input_per_million": 0.5, "output_per_million": 1.5}
                },
                "generation": {"temperature": 1e-1, "max_tokens": 256, "seed": 7},
                "label_plan": {"n": 40, "seed": 3},
            },
            {"name": "second", "suite": "suites/tiny.yaml", "models": ["sim/a", "sim/b"]},
        ],
    )
    runs = load_runs(path, check_suites=True)
    demo = runs.get("demo")
    assert demo.prices["openrouter/acme/small"].output_per_million == 1.5
    # 1e-1 is a number in JSON (YAML 1.1 alone would have read it as text)
    assert demo.generation.temperature == pytest.approx(0.1)
    assert demo.generation.max_tokens == 256
    assert demo.label_plan.n == 40
    assert demo.results_path == Path("results/demo.json")
    second = runs.get("second")
    assert second.judges == ()
    assert second.generation.max_tokens == 4096
    assert runs.suite_file(1) == tmp_path / "suites" / "tiny.yaml"
    with pytest.raises(KonkordError, match=r'no run named "third" \(runs: demo, second\)'):
        runs.get("third")


def test_tab_indented_json_is_fine(tmp_path: Path) -> None:
    _write_suite(tmp_path)
    path = tmp_path / "runs.json"
    path.write_text(
        '{\n\t"runs": [\n\t\t{"name": "x", "suite": "suites/tiny.yaml",\n'
        '\t\t "models": ["sim/a", "sim/b"]}\n\t]\n}\n'
    )
    assert load_runs(path).runs[0].name == "x"


def test_resolve_run_from_runs_json(project: Path) -> None:
    _write_suite(project)
    _write_runs(
        project,
        [
            {
                "name": "demo",
                "suite": "suites/tiny.yaml",
                "models": ["sim/a", "sim/b"],
                "generation": {"temperature": 0.5, "max_tokens": 99, "seed": 3},
                "api_base": "http://127.0.0.1:9/v1",
            }
        ],
    )
    spec = resolve_run("demo")
    assert spec.in_runs_file
    assert spec.models == ("sim/a", "sim/b")
    assert spec.settings == CallSettings(0.5, 99, 3, "http://127.0.0.1:9/v1")
    assert spec.suite.tasks[0].id == "a"
    assert spec.run_dir == Path("runs/demo")


def test_resolve_run_names_the_line_of_a_missing_suite(project: Path) -> None:
    _write_runs(project, [{"name": "demo", "suite": "suites/gone.yaml", "models": ["a", "b"]}])
    with pytest.raises(SuiteError) as caught:
        resolve_run("demo")
    assert str(caught.value) == (
        'runs.json:5: runs[0].suite "suites/gone.yaml" was not found (looked for suites/gone.yaml)'
    )


def test_resolve_run_from_a_manifest(project: Path) -> None:
    suite_path = _write_suite(project)
    spec = RunSpec(
        name="adhoc",
        suite_path=suite_path.relative_to(project),
        suite=load_suite(suite_path),
        models=("sim/a", "sim/b"),
        settings=CallSettings(temperature=0.3, max_tokens=50, seed=None),
    )
    write_manifest(spec)
    again = resolve_run("adhoc")
    assert not again.in_runs_file
    assert again.models == ("sim/a", "sim/b")
    assert again.settings == CallSettings(temperature=0.3, max_tokens=50, seed=None)


def test_a_broken_manifest_is_a_clear_error(project: Path) -> None:
    path = project / "runs" / "adhoc" / "run.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"name": "adhoc", "suite": "x.yaml", "models": ["a"]}\n')
    with pytest.raises(KonkordError) as caught:
        resolve_run("adhoc")
    assert str(caught.value) == (
        f"{Path('runs/adhoc/run.json')}:1: models must list at least two models to compare"
    )


def test_an_unknown_run_says_how_to_start_one(project: Path) -> None:
    with pytest.raises(KonkordError, match="konkord run --suite PATH --models A,B --run NAME"):
        resolve_run("nothing")


def test_validate_checks_the_suites_a_runs_file_names(tmp_path: Path) -> None:
    shutil.copy(BAD / "tabs.yaml", tmp_path / "broken.yaml")
    runs = _write_runs(
        tmp_path, [{"name": "demo", "suite": "broken.yaml", "models": ["sim/a", "sim/b"]}]
    )
    result = CliRunner().invoke(cli, ["validate", str(runs)])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: {tmp_path / 'broken.yaml'}:5: a tab is used for indentation; "
        "YAML allows only spaces"
    )
    (tmp_path / "broken.yaml").write_text((BAD / "ok" / "suite.yaml").read_text())
    fixed = CliRunner().invoke(cli, ["validate", str(runs)])
    assert (fixed.exit_code, fixed.stdout) == (0, f"ok  {runs} (1 runs)\n")
