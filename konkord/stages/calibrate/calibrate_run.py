"""`konkord calibrate`: a run's calibration blocks recomputed from its labels, written back into
its results file and printed (how a judge is measured against people: calibrate.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from konkord.configuration.display_names import rename_text, shown
from konkord.configuration.runspec import RunSpec
from konkord.configuration.turns import conversation_count
from konkord.errors import KonkordError
from konkord.evidence.log import EvidenceLog
from konkord.evidence.verdicts import VerdictRecord, answer_shas, combine_verdicts
from konkord.results import schema as R
from konkord.results.schema import read_results, write_results
from konkord.stages.calibrate.calibrate import calibration_block
from konkord.stages.calibrate.calibrate_print import format_calibration
from konkord.stages.calibrate.methods import describe
from konkord.stages.calibrate.route_rows import route_rows
from konkord.stages.current import good_answers
from konkord.stages.decisions_of import decisions_of
from konkord.stages.judge.cascade_print import format_cascade
from konkord.stages.judge.cascade_report import cascade_block
from konkord.stages.judge.cascade_view import final_records
from konkord.stages.label.labels import current_labels


def calibrate_run(
    spec: RunSpec, judge: str | None = None, echo: Callable[[str], None] = print
) -> dict[str, R.Calibration]:
    """Recompute the calibration blocks of a run's results file from its labels, and print them.

    The rest of the file (ratings, diagnostics, the objective block) is left as `report` wrote it.
    """
    path = spec.results_path
    if not path.exists():
        raise KonkordError(
            f'run "{spec.name}" has no results file at {path}; '
            f"run `konkord report --run {spec.name}` first"
        )
    results = read_results(path, lazy=True)  # a large run's tasks: read as written back
    judges = [b.judge for b in results.judge_blocks]
    # a cascade's block answers to its shown name ("quick -> steward at 0.8") as to its judge's
    known = set(judges) | {b.route_name for b in results.judge_blocks}
    if judge is not None and judge not in known:
        shown_names = [b.route_name for b in results.judge_blocks]
        raise KonkordError(
            f'{path}: no block for judge "{judge}" (judges: {", ".join(shown_names) or "none"}); '
            f"judge with it and run `konkord report --run {spec.name}` first"
        )
    log = EvidenceLog(spec.run_dir)
    answers = good_answers(spec, log)
    shas = answer_shas(answers)
    labels = list(current_labels(log).values())
    decisions = decisions_of(spec, log, shas, labels)
    cascade = decisions.cascade
    out: dict[str, R.Calibration] = {}
    for block in results.judge_blocks:
        if judge is not None and judge not in (block.judge, block.route_name):
            continue
        records: Sequence[VerdictRecord] = decisions.judge_records.get(block.judge, [])
        if cascade is not None and block.judge == cascade.plan.strong:
            # the block ranks the cascade's verdicts: calibrate those
            records = final_records(cascade)
            block.cascade = cascade_block(decisions, spec.prices, spec.name)
        combined = combine_verdicts(records)
        calibration = calibration_block(spec, log, block.judge, combined, answers, labels)
        calibration.objective = block.calibration.objective
        block.calibration = calibration
        describe(block, conversation_count([t.id for t in spec.suite.tasks]))
        out[block.judge] = calibration
        for line in format_calibration(block.route_name, calibration):
            echo(rename_text(line, spec.names))
        for line in format_cascade(block.cascade) if block.cascade is not None else []:
            echo(rename_text(line, spec.names))
    if cascade is not None:
        results.routes = route_rows(spec, log, decisions, answers)
        for row in results.routes:
            if row.calibration.status == "calibrated" and row.calibration.agreement is not None:
                echo(
                    f"{shown(row.name, spec.names)} ({row.role.replace('_', ' ')}): agreement "
                    "with people "
                    f"{row.calibration.agreement.k} of {row.calibration.agreement.n}"
                )
    write_results(results, path)
    echo(f"updated {path}")
    return out
