"""runs.json: the published runs, each naming its suite, models, judges and label plan."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from konkord.errors import SuiteError
from konkord.suite import SLUG, parse_located
from konkord.yamlpos import load_json

DEFAULT_RUNS_FILE = Path("runs.json")


class Price(BaseModel):
    """Prices in dollars per million tokens, for models litellm's cost map does not know."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)


class Generation(BaseModel):
    """Settings that change an answer; each is part of the answer's cache key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float | None = 0.0
    max_tokens: int = Field(default=4096, gt=0)
    seed: int | None = 0


class SimulatedLabeller(BaseModel):
    """A simulated person for demo runs: agrees with the truth with probability `accuracy`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    accuracy: float = Field(ge=0, le=1)


class LabelPlan(BaseModel):
    """How many comparisons people should label, and with which seed the queue is drawn."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: int = Field(default=100, ge=0)
    seed: int = 0
    simulated_labellers: tuple[SimulatedLabeller, ...] = ()


class RunEntry(BaseModel):
    """One published run: what was asked of which models, judged by whom."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    suite: str
    models: tuple[str, ...]
    judges: tuple[str, ...] = ()
    label_plan: LabelPlan = LabelPlan()
    results: str | None = None
    prices: dict[str, Price] = {}
    generation: Generation = Generation()
    api_base: str | None = None

    @field_validator("name")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not SLUG.match(value):
            raise ValueError(
                f'"{value}" is not a slug (use lower case, digits, \'-\', \'_\' or \'.\')'
            )
        return value

    @field_validator("models")
    @classmethod
    def _models(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(value) < 2:
            raise ValueError("must list at least two models to compare")
        if len(set(value)) != len(value):
            raise ValueError("lists a model twice")
        return value

    @model_validator(mode="after")
    def _judge_not_ranked(self) -> RunEntry:
        for judge in self.judges:
            if judge in self.models:
                raise ValueError(f'judge "{judge}" is also a ranked model')
        return self

    @property
    def results_path(self) -> Path:
        """Where `report` writes this run's results file."""
        return Path(self.results or f"results/{self.name}.json")


class RunsFile(BaseModel):
    """The whole runs.json."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    runs: tuple[RunEntry, ...] = ()

    def get(self, name: str) -> RunEntry:
        """The run with this name, or a KonkordError listing the names there are."""
        for run in self.runs:
            if run.name == name:
                return run
        names = ", ".join(r.name for r in self.runs) or "none"
        raise SuiteError(f'runs.json has no run named "{name}" (runs: {names})')


def load_runs(path: Path | str = DEFAULT_RUNS_FILE) -> RunsFile:
    """Load and validate runs.json; errors name the file, line and field."""
    path = Path(path)
    located = load_json(path)
    runs: RunsFile = parse_located(path, located, RunsFile)
    seen: dict[str, int] = {}
    for index, run in enumerate(runs.runs):
        if run.name in seen:
            line = located.line_of(("runs", index, "name"))
            raise SuiteError(f'{path}:{line}: runs[{index}].name "{run.name}" is used twice')
        seen[run.name] = index
    return runs
