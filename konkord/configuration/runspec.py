"""What a run is: its suite, models, judges and settings, from runs.json or the run's manifest.

A run started with `konkord run --suite ... --models ...` and not listed in runs.json keeps a
manifest (runs/<run>/run.json), so later stages can be given just `--run NAME`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from konkord.configuration.call_settings import CallSettings
from konkord.configuration.credentials import strip_url_credentials
from konkord.configuration.deployments import Deployment, load_deployment_file
from konkord.configuration.pair_design import PairDesign
from konkord.configuration.runs_config import (
    DEFAULT_RUNS_FILE,
    Cascade,
    LabelPlan,
    Price,
    RunEntry,
    load_runs,
    runs_file_present,
)
from konkord.configuration.suite import Suite, load_suite
from konkord.errors import KonkordError
from konkord.evidence.atomic import write_atomic
from konkord.evidence.paths import (
    RUNS_ROOT as RUNS_ROOT,  # (where it has always been imported from)
)
from konkord.evidence.paths import (
    file_problem,
    require_folder_inside,
    require_state_inside,
)


@dataclass(frozen=True)
class RunSpec:
    """Everything a stage needs to know about one run."""

    name: str
    suite_path: Path
    suite: Suite
    models: tuple[str, ...]
    judges: tuple[str, ...] = ()
    settings: CallSettings = field(default_factory=CallSettings)
    prices: dict[str, Price] = field(default_factory=dict)
    label_plan: LabelPlan = field(default_factory=LabelPlan)
    results_path: Path = Path("results/run.json")
    in_runs_file: bool = False
    cascade: Cascade | None = None  # a first-pass judge in front of the strong one
    deployments: dict[str, tuple[Deployment, ...]] = field(default_factory=dict)
    deployments_file: Path | None = None  # where `deployments` came from, if from a file
    names: dict[str, str] = field(default_factory=dict)  # full spec -> display name (runs.json)
    style_control: bool = True  # runs.json "style_control": false switches it off
    design: PairDesign = field(default_factory=PairDesign)  # which comparisons are judged

    @property
    def run_dir(self) -> Path:
        """The run's evidence directory."""
        return RUNS_ROOT / self.name


def spec_from_entry(entry: RunEntry, base: Path = Path(".")) -> RunSpec:
    """A RunSpec for a run listed in runs.json (relative suite paths are relative to `base`)."""
    gen = entry.generation
    require_folder_inside(RUNS_ROOT / entry.name, "the run folder")
    require_state_inside()
    suite_path = base / entry.suite
    return RunSpec(
        name=entry.name,
        suite_path=suite_path,
        suite=load_suite(suite_path),
        models=entry.models,
        judges=entry.judges,
        settings=CallSettings(gen.temperature, gen.max_tokens, gen.seed, entry.api_base),
        prices=dict(entry.prices),
        deployments=_deployments(entry, base),
        label_plan=entry.label_plan,
        results_path=entry.results_path,
        in_runs_file=True,
        cascade=entry.cascade,
        deployments_file=base / entry.deployments if isinstance(entry.deployments, str) else None,
        names=dict(entry.names),
        style_control=entry.style_control,
        design=entry.design,
    )


def _deployments(entry: RunEntry, base: Path) -> dict[str, tuple[Deployment, ...]]:
    if isinstance(entry.deployments, str):
        return load_deployment_file(base / entry.deployments)
    return dict(entry.deployments or {})


def manifest_path(name: str) -> Path:
    """Where an unlisted run keeps its manifest."""
    return RUNS_ROOT / name / "run.json"


def write_manifest(spec: RunSpec) -> None:
    """Remember an unlisted run's suite, models and settings for later stages."""
    path = manifest_path(spec.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    manifest = {
        "name": spec.name,
        "suite": str(spec.suite_path),
        "models": list(spec.models),
        "judges": list(spec.judges),
        "generation": {
            "temperature": spec.settings.temperature,
            "max_tokens": spec.settings.max_tokens,
            "seed": spec.settings.seed,
        },
        "api_base": strip_url_credentials(spec.settings.api_base)
        if spec.settings.api_base
        else None,
    }
    if spec.design.kind != "all":
        manifest["design"] = spec.design.as_json()
    if spec.cascade is not None:
        manifest["cascade"] = spec.cascade.model_dump(exclude_none=True)
    write_atomic(path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def resolve_run(name: str, runs_file: Path = DEFAULT_RUNS_FILE) -> RunSpec:
    """The run called `name`: from runs.json if listed there, else from its manifest.

    Every path it names, and the runs/ folder its evidence goes to, must resolve inside the
    project folder (runs.json's paths are checked as runs.json loads)."""
    require_folder_inside(RUNS_ROOT / name, "the run folder")
    if runs_file_present(runs_file):
        runs = load_runs(runs_file)
        for index, entry in enumerate(runs.runs):
            if entry.name == name:
                runs.check_suite_exists(index)
                return spec_from_entry(entry, runs_file.parent)
    path = manifest_path(name)
    if path.exists():
        entry = load_manifest(path)
        return replace(spec_from_entry(entry), in_runs_file=False)
    raise KonkordError(
        f'no run named "{name}": it is not in {runs_file} and {path} does not exist '
        "(start it with `konkord run --suite PATH --models A,B --run NAME`)"
    )


class DamagedManifest(KonkordError):
    """A run.json that is empty or cut short (an older konkord could be killed mid-write)."""


def load_manifest(path: Path) -> RunEntry:
    """An unlisted run's manifest, validated like a runs.json entry."""
    from konkord.configuration.suite import parse_located
    from konkord.configuration.yamlpos import load_json

    try:
        located = load_json(path)
    except KonkordError as exc:
        raise DamagedManifest(
            f"{exc}; if a crash cut it short, write it again with `konkord run --run "
            f"{path.parent.name} --suite SUITE --models A,B` (the run's suite and models; "
            "its answers and verdicts are kept and nothing recorded is paid again)"
        ) from None
    entry: RunEntry = parse_located(path, located, RunEntry)
    for loc, problem in entry.problems():
        raise KonkordError(f"{path}:{located.line_of(loc)}: {loc[0]} {problem}")
    for field_name, value in (("suite", Path(entry.suite)), ("results", entry.results_path)):
        outside = file_problem(value, Path("."))
        if outside is not None:
            line = located.line_of((field_name,))
            raise KonkordError(f"{path}:{line}: {field_name} {outside}")
    return entry
