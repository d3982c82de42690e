"""A run's summary for the runs index and site-wide pages, read from a results file without
validating all of it, and cached between builds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from konkord.results.schema import Results
from konkord.site.judges_page import judge_figures

_CALIBRATION = {"status", "agreement", "kappa"}
_RATING = {"model", "rank", "rank_best", "rank_worst"}


def first_place(ratings: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The models the data allows in first place, each with its rank range (best, worst): one
    model whose range is 1 alone is a clear first; several are a first place not separated."""
    return [
        {
            "model": r["model"],
            "best": r.get("rank_best") or r["rank"],
            "worst": r.get("rank_worst") or r.get("rank_best") or r["rank"],
        }
        for r in ratings
        if r["rank"] == 1
    ]


class _SuiteHead(BaseModel):
    name: str
    path: str
    task_count: int


class _RatingHead(BaseModel):
    model: str
    rank: int
    rank_best: int | None = None
    rank_worst: int | None = None


class _CalibrationHead(BaseModel):
    status: str
    agreement: dict[str, Any] | None = None
    kappa: dict[str, Any] | None = None


class _CascadeHead(BaseModel):
    route: str = ""


class _RouteHead(BaseModel):
    name: str
    calibration: _CalibrationHead


class _JudgeBlockHead(BaseModel):
    judge: str = ""
    ratings: list[_RatingHead]
    calibration: _CalibrationHead
    cascade: _CascadeHead | None = None


class ResultsHead(BaseModel):
    """The few fields of a results file that its summary needs. Validating only these from
    the JSON is five times faster than json.loads, which builds the whole file's objects."""

    schema_version: int
    run: str
    suite: _SuiteHead
    models: list[str]
    judges: list[str]
    evidence_date: str | None
    konkord_version: str
    simulated: bool
    judge_blocks: list[_JudgeBlockHead]
    judge_panel: dict[str, Any] | None = None
    routes: list[_RouteHead] = []


@dataclass(frozen=True)
class RunSummary:
    """What the runs index and site-wide pages need of a run, cached so unchanged runs are not
    parsed again."""

    run: str
    suite: str
    suite_path: str
    models: list[str]
    judges: list[str]
    date: str | None
    konkord_version: str
    simulated: bool
    schema_version: int
    tasks: int
    calibrated: list[bool] = field(default_factory=list)
    # the first judge's candidates for first place: model, best and worst rank
    leaders: list[dict[str, Any]] = field(default_factory=list)
    judge_figures: list[dict[str, Any]] = field(default_factory=list)  # for judges across runs

    @classmethod
    def of(cls, results: Results) -> RunSummary:
        first = results.judge_blocks[0] if results.judge_blocks else None
        ratings = [r.model_dump(include=_RATING) for r in first.ratings] if first else []
        return cls(
            run=results.run,
            suite=results.suite.name,
            suite_path=results.suite.path,
            models=list(results.models),
            judges=list(results.judges),
            date=results.evidence_date,
            konkord_version=results.konkord_version,
            simulated=results.simulated,
            schema_version=results.schema_version,
            tasks=results.suite.task_count,
            calibrated=[b.calibration.status == "calibrated" for b in results.judge_blocks],
            leaders=first_place(ratings),
            judge_figures=judge_figures(
                [
                    {
                        "judge": b.judge,
                        "calibration": b.calibration.model_dump(include=_CALIBRATION),
                        "cascade": {"route": b.cascade.route} if b.cascade else None,
                    }
                    for b in results.judge_blocks
                ],
                results.judge_panel.model_dump() if results.judge_panel else None,
                [
                    {"name": r.name, "calibration": r.calibration.model_dump(include=_CALIBRATION)}
                    for r in results.routes
                ],
            ),
        )

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> RunSummary:
        """The same summary from the file's raw JSON, without validating the whole file (the
        full check happens when its pages render); KeyError or TypeError if malformed."""
        blocks = data["judge_blocks"]
        ratings = blocks[0]["ratings"] if blocks else []
        return cls(
            run=str(data["run"]),
            suite=str(data["suite"]["name"]),
            suite_path=str(data["suite"]["path"]),
            models=[str(m) for m in data["models"]],
            judges=[str(j) for j in data["judges"]],
            date=data["evidence_date"],
            konkord_version=str(data["konkord_version"]),
            simulated=bool(data["simulated"]),
            schema_version=int(data["schema_version"]),
            tasks=int(data["suite"]["task_count"]),
            calibrated=[b["calibration"]["status"] == "calibrated" for b in blocks],
            leaders=first_place(ratings),
            judge_figures=judge_figures(
                blocks, data.get("judge_panel"), data.get("routes") or []
            ),
        )

    @classmethod
    def from_results_json(cls, data: bytes) -> RunSummary:
        """The summary straight from a results file's bytes; ValueError (pydantic's
        ValidationError among them) if the fields it needs are missing or malformed."""
        return cls.from_data(ResultsHead.model_validate_json(data).model_dump())

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunSummary:
        return cls(**data)
