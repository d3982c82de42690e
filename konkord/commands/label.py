"""`konkord label`: start the local blind labelling app (Streamlit, the `label` extra)."""

from __future__ import annotations

import click

from konkord.commands.inputs import PORT, PROBABILITY, RUN_NAME, SEED, whole


@click.command()
@click.option("--run", "run_name", type=RUN_NAME, required=True, help="Run whose comparisons to label.")
@click.option(
    "--n",
    type=whole(0, 10_000_000),
    help="How many labels you give in all [default: the run's label plan, 100].",
)
@click.option(
    "--seed",
    type=SEED,
    help="Seed of the labelling order and of which answer is shown first "
    "[default: the run's label plan, 0]. The same seed resumes the same queue.",
)
@click.option("--labeller", help="Your name in the labels [default: your login name].")
@click.option(
    "--overlap",
    type=PROBABILITY,
    default=0.5,
    show_default=True,
    help="Share of your queue drawn from items other people labelled "
    "(for human-vs-human agreement).",
)
@click.option("--port", type=PORT, default=8501, show_default=True, help="Local port of the app.")
@click.option(
    "--address",
    default="127.0.0.1",
    show_default=True,
    help="Address the app listens on; 0.0.0.0 lets other machines on the network label.",
)
@click.option("--no-browser", is_flag=True, help="Do not open a browser window.")
def label(
    run_name: str,
    n: int | None,
    seed: int | None,
    labeller: str | None,
    overlap: float,
    port: int,
    address: str,
    no_browser: bool,
) -> None:
    """Label comparisons blind in a local web app: two answers, no model names.

    Keys: 1 = Answer 1 better, 2 = Answer 2 better, 3 or t = about equal,
    s = skip, u = undo. Every label is saved to runs/<run>/labels.jsonl the
    moment you give it; stop at any time and run the same command to resume.
    """
    import getpass
    import importlib.util
    import sys

    from konkord.configuration.runspec import resolve_run
    from konkord.errors import KonkordError
    from konkord.evidence.log import EvidenceLog
    from konkord.stages.label.labels import current_labels
    from konkord.stages.label.launch import app_url, serve, streamlit_command
    from konkord.stages.label.sample import pool_for_run

    if importlib.util.find_spec("streamlit") is None:
        raise KonkordError(
            "the labelling app needs streamlit: install the label extra: "
            "pip install 'konkord[label]'"
        )
    spec = resolve_run(run_name)
    log = EvidenceLog(spec.run_dir)
    current_labels(log)  # a corrupt labels.jsonl stops here, in one line, not inside the page
    pool = pool_for_run(spec, log)
    if not pool:
        raise KonkordError(
            f"run {spec.name} has nothing to label: no task has good answers from two models "
            f"(run `konkord run --run {spec.name}` first)"
        )
    who = labeller or getpass.getuser()
    app_args = ["--run", spec.name, "--labeller", who, "--overlap", str(overlap)]
    if n is not None:
        app_args += ["--n", str(n)]
    if seed is not None:
        app_args += ["--seed", str(seed)]
    url = app_url(address, port)
    click.echo(
        f"labelling run {spec.name} as {who}: {len(pool)} comparisons in the pool; "
        f"open {url} (Ctrl-C to stop; every label is already saved)",
        err=True,
    )
    sys.exit(serve(streamlit_command(address, port, app_args), url, not no_browser))
