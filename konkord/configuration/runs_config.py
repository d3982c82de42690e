"""runs.json: the published runs, each naming its suite, models, judges and label plan."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from konkord.configuration.deployments import Deployment
from konkord.configuration.limits import MAX_TOKENS_LIMIT, SEED_LIMIT, TEMPERATURE_LIMIT
from konkord.configuration.names import SLUG, slug_problem
from konkord.configuration.pair_design import PairDesign, parse_design
from konkord.configuration.suite import parse_located
from konkord.configuration.validated import ApiBase
from konkord.configuration.yamlpos import Loc, describe_loc, load_json
from konkord.errors import SuiteError
from konkord.evidence.paths import file_problem

DEFAULT_RUNS_FILE = Path("runs.json")


class Price(BaseModel):
    """Prices in dollars per million tokens, for models litellm's cost map does not know."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)


class Generation(BaseModel):
    """Settings that change an answer; each is part of the answer's cache key."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    temperature: float | None = Field(default=0.0, ge=0, le=TEMPERATURE_LIMIT)
    max_tokens: int = Field(default=4096, gt=0, le=MAX_TOKENS_LIMIT)
    seed: int | None = Field(default=0, ge=-SEED_LIMIT - 1, le=SEED_LIMIT)


class SimulatedLabeller(BaseModel):
    """A simulated person for demo runs: agrees with the truth with probability `accuracy`."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str
    accuracy: float = Field(ge=0, le=1)


class LabelPlan(BaseModel):
    """How many comparisons people should label, and with which seed the queue is drawn."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: int = Field(default=100, ge=0, le=10_000_000)
    seed: int = Field(default=0, ge=-SEED_LIMIT - 1, le=SEED_LIMIT)
    simulated_labellers: tuple[SimulatedLabeller, ...] = ()


def parse_confidence(spec: str) -> int | None:
    """`logprobs` -> None; `samples:N` -> N (at least 2). Raises ValueError naming the problem."""
    text = spec.strip().lower()
    if text == "logprobs":
        return None
    name, _, count = text.partition(":")
    if name == "samples" and count.isdigit() and int(count) >= 2:
        return int(count)
    raise ValueError(
        f'"{spec}" is not a confidence source (use logprobs, or samples:N with N >= 2)'
    )


class Cascade(BaseModel):
    """A cheap first-pass judge in front of the run's judge: it judges every pair in both
    orders, and a pair goes to the strong judge unless both orders agree and its averaged
    confidence reaches `accept_at`."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    first_pass: str
    strong: str | None = Field(default=None, description="Default: the run's first judge.")
    accept_at: float = Field(default=0.8, ge=0.5, le=1.0)
    confidence: str = "logprobs"
    audit: int | None = Field(
        default=None,
        ge=0,
        description="Pairs the first pass decided that the strong judge also judges, so labels "
        "can compare the two on the same pairs. Default: the label plan's n.",
    )

    @field_validator("confidence")
    @classmethod
    def _confidence(cls, value: str) -> str:
        parse_confidence(value)
        return value

    def strong_judge(self, judges: tuple[str, ...]) -> str | None:
        """The judge the cascade escalates to: `strong`, else the run's first judge."""
        return self.strong or (judges[0] if judges else None)


MAX_NAME_LENGTH = 60


def _spec_of(value: Any) -> Any:
    """A model or judge as listed: its spec, or {"model": spec, "name": display name}."""
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"model", "name"})
        if unknown:
            raise ValueError(
                f'unknown key "{unknown[0]}" (a model is {{"model": ..., "name": ...}})'
            )
        if not isinstance(value.get("model"), str):
            raise ValueError('needs "model": the full name litellm calls, e.g. openai/gpt-4o')
        return value["model"]
    return value


ModelSpec = Annotated[str, BeforeValidator(_spec_of)]


class RunEntry(BaseModel):
    """One published run: what was asked of which models, judged by whom."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    suite: str
    models: tuple[ModelSpec, ...]
    judges: tuple[ModelSpec, ...] = ()
    # full spec -> the short name pages and the terminal show (from {"model", "name"} entries)
    names: dict[str, str] = {}
    label_plan: LabelPlan = LabelPlan()
    results: str | None = None
    prices: dict[str, Price] = {}
    generation: Generation = Generation()
    api_base: ApiBase = None
    cascade: Cascade | None = None
    # Style control (the ranking with length and formatting taken out) is on unless switched off.
    style_control: bool = True
    # model -> its deployments (konkord.configuration.deployments), or the name of a JSON file holding that map
    deployments: dict[str, tuple[Deployment, ...]] | str | None = None
    # which comparisons the judge is paid for (konkord.configuration.pair_design)
    design: PairDesign = PairDesign()

    @field_validator("design", mode="before")
    @classmethod
    def _design(cls, value: object) -> PairDesign:
        return parse_design(value)

    @model_validator(mode="before")
    @classmethod
    def _gather_names(cls, data: Any) -> Any:
        """Move the display names of {"model": ..., "name": ...} entries into `names`."""
        if not isinstance(data, dict):
            return data
        names = dict(data["names"]) if isinstance(data.get("names"), dict) else {}
        for field in ("models", "judges"):
            listed = data.get(field)
            for item in listed if isinstance(listed, list | tuple) else ():
                if isinstance(item, dict) and isinstance(item.get("model"), str) and "name" in item:
                    names[item["model"]] = item["name"]
        if names or "names" in data:
            data = {**data, "names": names}
        return data

    @field_validator("names")
    @classmethod
    def _display_names(cls, value: dict[str, str]) -> dict[str, str]:
        seen: dict[str, str] = {}
        for spec, name in value.items():
            if not name.strip() or name != name.strip() or len(name) > MAX_NAME_LENGTH:
                raise ValueError(
                    f'"{name}" (for {spec}) is not a display name: 1 to {MAX_NAME_LENGTH} '
                    "characters, no leading or trailing spaces"
                )
            if name in seen:
                raise ValueError(f'"{name}" names both {seen[name]} and {spec}')
            seen[name] = spec
        return value

    @field_validator("name")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not SLUG.match(value):
            raise ValueError(slug_problem(value))
        return value

    @field_validator("suite")
    @classmethod
    def _suite(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name a suite file, e.g. suites/my_suite.yaml")
        return value

    @field_validator("models", "judges")
    @classmethod
    def _model_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not name.strip() or name != name.strip() or " " in name:
                raise ValueError(f'"{name}" is not a model name (no spaces, e.g. openai/gpt-4o)')
        if len(set(value)) != len(value):
            twice = sorted({name for name in value if value.count(name) > 1})
            raise ValueError(f'lists "{twice[0]}" twice')
        return value

    @field_validator("models")
    @classmethod
    def _two_models(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(value) < 2:
            raise ValueError("must list at least two models to compare")
        return value

    def problems(self) -> list[tuple[Loc, str]]:
        """Disagreements between fields, with the field to point at (checked by load_runs)."""
        out: list[tuple[Loc, str]] = []
        for index, judge in enumerate(self.judges):
            if judge in self.models:
                out.append((("judges", index), f'"{judge}" is also a ranked model'))
        if self.cascade is not None:
            out += self._cascade_problems(self.cascade)
        first_pass = {self.cascade.first_pass} if self.cascade else set()
        listed = {*self.models, *self.judges, *first_pass}
        for spec, name in self.names.items():
            if spec not in listed:
                out.append(
                    (("names", spec), f'"{spec}" is neither a model nor a judge of this run')
                )
            elif name in listed and name != spec:
                out.append(
                    (("names", spec), f'"{name}" is the full name of another model or judge')
                )
        if isinstance(self.deployments, dict):
            for model in self.deployments:
                if model not in (*self.models, *self.judges, *first_pass):
                    out.append(
                        (
                            ("deployments", model),
                            f'"{model}" is neither a model nor a judge of this run',
                        )
                    )
        for model in self.prices:
            if model not in self.models and model not in self.judges and model not in first_pass:
                out.append(
                    (("prices", model), f'"{model}" is neither a model nor a judge of this run')
                )
        return out

    def _cascade_problems(self, cascade: Cascade) -> list[tuple[Loc, str]]:
        strong = cascade.strong_judge(self.judges)
        if strong is None:
            return [(("cascade",), 'needs a strong judge: list one in "judges"')]
        if strong not in self.judges:
            return [(("cascade", "strong"), f'"{strong}" is not one of this run\'s judges')]
        if cascade.first_pass == strong:
            return [(("cascade", "first_pass"), "is the strong judge itself")]
        if cascade.first_pass in self.models:
            return [(("cascade", "first_pass"), f'"{cascade.first_pass}" is also a ranked model')]
        if cascade.first_pass in self.judges:
            return [
                (
                    ("cascade", "first_pass"),
                    f'"{cascade.first_pass}" is also listed in "judges"; a first pass judges for '
                    "the cascade only (remove it from judges)",
                )
            ]
        return []

    @property
    def results_path(self) -> Path:
        """Where `report` writes this run's results file."""
        return Path(self.results or f"results/{self.name}.json")


class RunsFile(BaseModel):
    """The whole runs.json."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    runs: tuple[RunEntry, ...] = ()
    _path: Path = PrivateAttr(default=DEFAULT_RUNS_FILE)
    _lines: dict[Loc, int] = PrivateAttr(default_factory=dict)

    def where(self, loc: Loc) -> str:
        """`file:line: field` for a place in this runs.json, to start an error message."""
        line = 1
        for end in range(len(loc), -1, -1):
            if loc[:end] in self._lines:
                line = self._lines[loc[:end]]
                break
        return f"{self._path}:{line}: {describe_loc(loc)}"

    def suite_file(self, index: int) -> Path:
        """Where run `index`'s suite is: relative paths are relative to runs.json's directory."""
        return self._path.parent / self.runs[index].suite

    def deployments_file(self, index: int) -> Path:
        """Where the deployments file a run names is (beside runs.json)."""
        return self._path.parent / str(self.runs[index].deployments)

    def check_suite_exists(self, index: int) -> None:
        """Refuse a run whose suite file is missing, naming the line in runs.json."""
        suite = self.suite_file(index)
        if not suite.is_file():
            raise SuiteError(
                f'{self.where(("runs", index, "suite"))} "{self.runs[index].suite}" was not '
                f"found (looked for {suite})"
            )

    def get(self, name: str) -> RunEntry:
        """The run with this name, or a KonkordError listing the names there are."""
        for run in self.runs:
            if run.name == name:
                return run
        names = ", ".join(r.name for r in self.runs) or "none"
        raise SuiteError(f'runs.json has no run named "{name}" (runs: {names})')


def runs_file_present(path: Path = DEFAULT_RUNS_FILE) -> bool:
    """Whether there is a runs.json, counting a symlink loop or a dangling symlink: loading it
    then says what is wrong, where `exists()` would quietly treat the project as having none."""
    return os.path.lexists(path)


def load_runs(path: Path | str = DEFAULT_RUNS_FILE, check_suites: bool = False) -> RunsFile:
    """Load and validate runs.json; errors name the file, line and field.

    With check_suites, every run's suite file must exist too (`konkord validate` asks for this;
    stages check only the run they work on).
    """
    path = Path(path)
    located = load_json(path)
    runs: RunsFile = parse_located(path, located, RunsFile)
    runs._path = path
    runs._lines = located.lines
    seen: dict[str, int] = {}
    for index, run in enumerate(runs.runs):
        if run.name in seen:
            raise SuiteError(
                f'{runs.where(("runs", index, "name"))} "{run.name}" is used twice '
                f"(first by runs[{seen[run.name]}])"
            )
        seen[run.name] = index
        for loc, problem in run.problems():
            raise SuiteError(f"{runs.where(('runs', index, *loc))} {problem}")
        paths = [("suite", Path(run.suite)), ("results", run.results_path)]
        if isinstance(run.deployments, str):  # read like the suite: never from outside
            paths.append(("deployments", Path(run.deployments)))
        for field, value in paths:
            outside = file_problem(value, path.parent)
            if outside is not None:
                raise SuiteError(f"{runs.where(('runs', index, field))} {outside}")
    if check_suites:
        for index in range(len(runs.runs)):
            runs.check_suite_exists(index)
    return runs
