"""`konkord run`: ask every model for one answer per task."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from konkord.commands.inputs import COUNT, MAX_TOKENS, RUN_NAME, SECONDS, SEED, TEMPERATURE, whole
from konkord.commands.large_run_options import (
    batch_status,
    large_run_options,
    print_estimates,
    report_budget,
)

if TYPE_CHECKING:
    from konkord.configuration.runspec import RunSpec


@click.command()
@click.option("--suite", "suite_path", type=click.Path(path_type=Path), help="Suite YAML file.")
@click.option("--models", help="Comma-separated litellm model names, e.g. gpt-4o-mini,sim/alpha.")
@click.option(
    "--run",
    "run_name",
    type=RUN_NAME,
    help="Run name (default: the suite file's name). A run listed in runs.json supplies its "
    "suite, models and settings; an earlier unlisted run remembers them in runs/NAME/run.json.",
)
@click.option(
    "--concurrency",
    type=COUNT,
    default=8,
    show_default=True,
    help="Parallel calls per model.",
)
@click.option(
    "--max-tokens", type=MAX_TOKENS, help="Output token cap per answer [default: 4096]."
)
@click.option(
    "--temperature", type=TEMPERATURE, help="Sampling temperature [default: 0]."
)
@click.option("--seed", type=SEED, help="Sampling seed, where the provider supports one [default: 0].")
@click.option("--api-base", help="Base URL of an OpenAI-compatible server (for local models).")
@click.option(
    "--timeout",
    type=SECONDS,
    help="Seconds to wait for one response before retrying [default: $KONKORD_TIMEOUT or 120].",
)
@click.option(
    "--retries",
    type=whole(0, 100),
    default=4,
    show_default=True,
    help="Retries after a rate limit, server error or timeout (exponential backoff from "
    "$KONKORD_BACKOFF_BASE seconds, default 1).",
)
@click.option("--force", is_flag=True, help="Regenerate answers even if recorded (pays again).")
@large_run_options
def run(
    suite_path: Path | None,
    models: str | None,
    run_name: str | None,
    concurrency: int,
    max_tokens: int | None,
    temperature: float | None,
    seed: int | None,
    api_base: str | None,
    timeout: float | None,
    retries: int,
    force: bool,
    batch: bool,
    dry_run: bool,
    max_cost: float | None,
) -> None:
    """Ask every model for one answer per task, saving each answer as it arrives.

    Resumable: a rerun makes no call for answers already recorded and retries
    the ones that failed. Responses are cached under .konkord/cache. Credentials
    come from the environment or a .env file in this directory (a variable set
    in the shell wins).

    \b
    Example:
      konkord run --suite suites/python_codegen.yaml --models sim/alpha,sim/beta
    """
    import asyncio
    import warnings

    from konkord.configuration.credentials import url_credentials_problem
    from konkord.evidence.log import EvidenceLog, TornLineWarning
    from konkord.providers.failures import failure_lines
    from konkord.providers.model_names import check_model_names
    from konkord.stages.run import answers_to_make

    if url_credentials_problem(api_base):
        raise _error(f"--api-base {url_credentials_problem(api_base)}")
    spec = plan_run(suite_path, models, run_name, max_tokens, temperature, seed, api_base)
    log = EvidenceLog(spec.run_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornLineWarning)
        todo = answers_to_make(log, spec.suite, spec.models, spec.settings, force)
        wanted = tuple(dict.fromkeys(model for _, model in todo))
        routed = tuple(m for m in wanted if m not in spec.deployments)
        # Before the client, progress bar and prices are imported: a typo answers at once.
        check_model_names(routed, "--models", spec.settings.api_base)

        from konkord.commands.progress import progress_bar
        from konkord.configuration.runspec import write_manifest
        from konkord.evidence.stopping import run_lock
        from konkord.providers.door import check_options, check_prices, make_client
        from konkord.providers.llm import missing_credentials
        from konkord.stages.run import generate_answers, truncated_answers

        if dry_run:
            from konkord.stages.dry_run import run_estimates

            print_estimates(run_estimates(spec, spec.settings, force, batch), batch)
            return
        check_options(spec, wanted, batch)
        missing = missing_credentials(routed, spec.settings.api_base)
        if missing:
            counts = {model: sum(m == model for _, m in todo) for model in missing}
            needs = "; ".join(
                f"{counts[model]} answer{'s' if counts[model] != 1 else ''} from {model} "
                f"need{'s' if counts[model] == 1 else ''} {' and '.join(names)}"
                for model, names in sorted(missing.items())
            )
            raise _error(
                f"run {spec.name}, stage run: {needs}. Set the key in the shell or in a .env "
                "file in this directory (see .env.example); nothing was called"
            )
        # one writer from here: a refused second `konkord run` leaves run.json as it was
        click.get_current_context().with_resource(run_lock(spec.run_dir, "run"))
        if not spec.in_runs_file:
            write_manifest(spec)
        if log.read("answers").torn:
            click.secho(
                f"note: {log.path('answers')} ends with an incomplete line (a crash mid-write); "
                "it is ignored and will be cut away (kept in a .torn file)",
                fg="yellow",
                err=True,
            )
        client = make_client(
            spec, batch=batch, max_cost=max_cost, concurrency=concurrency, retries=retries,
            timeout=timeout, on_status=batch_status, models=wanted,
        )
        check_prices(client, wanted)
        total = len(spec.suite.tasks) * len(spec.models)
        click.echo(
            f"run {spec.name}: {len(spec.suite.tasks)} tasks x {len(spec.models)} models",
            err=True,
        )
        with progress_bar("answers", total) as advance:
            summary = asyncio.run(
                generate_answers(
                    log,
                    spec.suite,
                    spec.models,
                    spec.settings,
                    client,
                    force=force,
                    on_done=advance,
                    on_total=lambda to_make: advance(total - to_make),
                )
            )
    for note in log.repairs:
        click.secho(f"repaired: {note}", fg="yellow", err=True)
    cost = f"${summary.cost_usd:.4f}"
    if summary.unknown_price_models:
        unknown = ", ".join(sorted(summary.unknown_price_models))
        cost += f" + unknown (no price for {unknown}; add prices in runs.json)"
    click.echo(
        f"generated {summary.generated}, cached {summary.cached}, already recorded "
        f"{summary.already_recorded}, failed {summary.failed}; cost {cost}"
    )
    stopped = report_budget(client)
    truncated = truncated_answers(log, spec.suite, spec.settings)
    if truncated:
        click.secho(
            f"cut off: {len(truncated)} answer{'s' if len(truncated) != 1 else ''} hit the "
            f"output cap of {spec.settings.max_tokens} tokens (kept, marked in the report; "
            f"raise --max-tokens to regenerate them with --force): {', '.join(truncated[:5])}"
            + (" ..." if len(truncated) > 5 else ""),
            fg="yellow",
            err=True,
        )
    for line in failure_lines(summary.failures, spec.settings.api_base):
        click.secho(f"  failed: {line}", fg="red", err=True)
    if summary.failed:
        click.echo("rerun the same command to retry the failures", err=True)
    if summary.failed or stopped:
        raise SystemExit(1)


def _error(message: str) -> Exception:
    from konkord.errors import KonkordError

    return KonkordError(message)


def _model_list(models: str | None) -> tuple[str, ...]:
    if models is None:
        return ()
    names = tuple(m.strip() for m in models.split(","))
    for name in names:
        if not name or " " in name:
            raise _error(f'--models: "{name}" is not a model name (comma-separated, no spaces)')
    if len(set(names)) != len(names):
        raise _error("--models lists a model twice")
    return names


def _same_suite(previous: RunSpec, suite_path: Path) -> None:
    """Refuse to point an existing run at another suite: its answers, verdicts and labels are
    of the suite it was made from, and rewriting run.json would mix two suites under one name."""
    if suite_path.resolve() == previous.suite_path.resolve():
        return
    raise _error(
        f'run "{previous.name}" was made from {previous.suite_path} with models '
        f"{','.join(previous.models)}, not from {suite_path}; continue it without --suite, "
        f"or start a new run: `konkord run --suite {suite_path} --models A,B --run NEW_NAME`"
    )


def plan_run(
    suite_path: Path | None,
    models: str | None,
    run_name: str | None,
    max_tokens: int | None,
    temperature: float | None,
    seed: int | None,
    api_base: str | None,
) -> RunSpec:
    """Work out the run from the options, runs.json and any manifest; validate everything first.

    Nothing is written here, so a bad suite, runs.json or option leaves no trace.
    """
    from dataclasses import replace

    from konkord.configuration.names import SLUG, slug_problem
    from konkord.configuration.runs_config import DEFAULT_RUNS_FILE, load_runs, runs_file_present
    from konkord.configuration.runspec import (
        RUNS_ROOT,
        DamagedManifest,
        RunSpec,
        load_manifest,
        manifest_path,
        spec_from_entry,
    )
    from konkord.configuration.suite import load_suite
    from konkord.evidence.paths import require_inside, require_state_inside
    from konkord.providers.llm import CallSettings

    model_list = _model_list(models)
    name = run_name if run_name is not None else (suite_path.stem if suite_path else None)
    if name is None:
        raise _error("give --suite PATH --models A,B (or --run NAME of a run in runs.json)")
    if not SLUG.match(name):
        hint = "--run" if run_name else "the suite file's name; choose one with --run"
        raise _error(f"run name {slug_problem(name)}: {hint}")

    spec: RunSpec | None = None
    if runs_file_present():
        runs = load_runs(DEFAULT_RUNS_FILE)
        for index, entry in enumerate(runs.runs):
            if entry.name != name:
                continue
            listed = runs.suite_file(index)
            if suite_path is not None and suite_path.resolve() != listed.resolve():
                raise _error(
                    f'{runs.where(("runs", index, "suite"))}: run "{name}" uses {entry.suite}, '
                    f"not {suite_path}; drop --suite, or pick another --run name"
                )
            runs.check_suite_exists(index)
            spec = spec_from_entry(entry, DEFAULT_RUNS_FILE.parent)
    if spec is None:
        previous = None
        if manifest_path(name).exists():
            try:
                previous = spec_from_entry(load_manifest(manifest_path(name)))
            except DamagedManifest:
                if suite_path is None or not model_list:
                    raise  # its message says how to write it again
                # --suite and --models say everything it held: it is written afresh
        if previous is not None and suite_path is not None:
            _same_suite(previous, suite_path)
        chosen_suite = suite_path or (previous.suite_path if previous else None)
        chosen_models = model_list or (previous.models if previous else ())
        if chosen_suite is None or not chosen_models:
            raise _error(
                f'run "{name}" is not in runs.json: give --suite PATH and --models A,B'
            )
        require_inside(chosen_suite, "--suite", is_file=False)
        require_inside(RUNS_ROOT / name, "the run folder", is_file=False)
        require_state_inside()
        require_inside(Path(f"results/{name}.json"), "the results file")
        spec = RunSpec(
            name=name,
            suite_path=chosen_suite,
            suite=load_suite(chosen_suite),
            models=chosen_models,
            judges=previous.judges if previous else (),
            settings=previous.settings if previous else CallSettings(),
            results_path=Path(f"results/{name}.json"),
        )
    if model_list:
        spec = replace(spec, models=model_list)
    if len(spec.models) < 2:
        raise _error("--models needs at least two models to compare")
    settings = CallSettings(
        temperature=temperature if temperature is not None else spec.settings.temperature,
        max_tokens=max_tokens or spec.settings.max_tokens,
        seed=seed if seed is not None else spec.settings.seed,
        api_base=api_base or spec.settings.api_base,
    )
    return replace(spec, settings=settings)
