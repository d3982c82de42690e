"""The blind labelling app (Streamlit): two answers side by side, three choices, nothing lost.

Started by `konkord label`, which runs `streamlit run app.py -- --run NAME ...`; tests point it
at a scratch project with KONKORD_LABEL_* environment variables instead. The page never shows
a model name, a judge's verdict or rationale, or which order the judge saw: only the rubric,
the task and the two answers as "Answer 1" and "Answer 2". Each label is appended (fsynced) to
the evidence log inside the button's callback, before the next item is drawn.
"""

from __future__ import annotations

import argparse
import getpass
import html
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import nh3
import streamlit as st
from markdown_it import MarkdownIt

from konkord.configuration.runspec import RunSpec, resolve_run
from konkord.configuration.suite import Suite
from konkord.configuration.turns import split_unit, unit_id
from konkord.evidence.log import EvidenceLog, Record
from konkord.stages.label.labels import current_labels, record_label, undo_last_label
from konkord.stages.label.sample import Choice, Comparison, LabelQueue, QueueItem, label_queue

ENV_PREFIX = "KONKORD_LABEL_"

# Fixed answer panes scroll on their own, so the buttons stay on screen for long answers;
# the pane height follows the window (vh) so a laptop screen is used to its bottom.
PAGE_CSS = """
<style>
[data-testid="stMainBlockContainer"] { padding-top: 3.2rem; padding-bottom: 0.5rem; }
.st-key-prompt { max-height: 20vh; overflow-y: auto; }
div:has(> .st-key-answer_1), div:has(> .st-key-answer_2),
.st-key-answer_1, .st-key-answer_2 {
  --pane: max(220px, calc(100vh - 15rem - 20vh));
  box-sizing: border-box; height: var(--pane) !important;
}
div:has(> .st-key-answer_1), div:has(> .st-key-answer_2) { flex: 0 0 var(--pane) !important; }
.st-key-tie_t { display: none; }
.konkord-md p { margin: 0 0 0.6em 0; }
.konkord-task { font-size: 0.85rem; opacity: 0.7; margin-bottom: 0.3em; }
.konkord-md pre { white-space: pre-wrap; }
</style>
"""


@dataclass(frozen=True)
class LabelConfig:
    """What this labelling session is about; from the command line or the environment."""

    run: str
    labeller: str
    n: int | None = None
    seed: int | None = None
    overlap: float = 0.5


def parse_config(argv: Sequence[str], environ: dict[str, str] | os._Environ[str]) -> LabelConfig:
    """Read KONKORD_LABEL_* variables when set (tests), else the arguments after `--`."""
    if environ.get(ENV_PREFIX + "RUN"):
        n = environ.get(ENV_PREFIX + "N")
        seed = environ.get(ENV_PREFIX + "SEED")
        return LabelConfig(
            run=environ[ENV_PREFIX + "RUN"],
            labeller=environ.get(ENV_PREFIX + "LABELLER") or getpass.getuser(),
            n=int(n) if n else None,
            seed=int(seed) if seed else None,
            overlap=float(environ.get(ENV_PREFIX + "OVERLAP") or 0.5),
        )
    parser = argparse.ArgumentParser(prog="konkord label app")
    parser.add_argument("--run", required=True)
    parser.add_argument("--labeller", default=None)
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--overlap", type=float, default=0.5)
    args = parser.parse_args(list(argv))
    return LabelConfig(
        run=args.run,
        labeller=args.labeller or getpass.getuser(),
        n=args.n,
        seed=args.seed,
        overlap=args.overlap,
    )


_markdown = MarkdownIt("commonmark", {"html": False}).enable("table")


def safe_markdown_html(text: str) -> str:
    """Untrusted Markdown as sanitised HTML: raw HTML is escaped, then nh3 cleans the result."""
    return f'<div class="konkord-md">{nh3.clean(_markdown.render(text))}</div>'


def answer_segments(text: str, answer_language: str | None) -> list[tuple[str, str, str | None]]:
    """Split an answer into ("md", text, None) and ("code", code, language) segments.

    Top-level fenced blocks become highlighted code; when the suite expects code and the answer
    has no fence at all, the whole answer is shown as code.
    """
    tokens = _markdown.parse(text)
    lines = text.splitlines(keepends=True)
    segments: list[tuple[str, str, str | None]] = []
    cursor = 0
    for token in tokens:
        if token.type != "fence" or token.level != 0 or token.map is None:
            continue
        start, end = token.map
        if start > cursor:
            segments.append(("md", "".join(lines[cursor:start]), None))
        language = token.info.strip().split(" ")[0] or answer_language
        segments.append(("code", token.content.rstrip("\n"), language or None))
        cursor = end
    if cursor < len(lines):
        segments.append(("md", "".join(lines[cursor:]), None))
    segments = [s for s in segments if s[0] == "code" or s[1].strip()]
    if answer_language and not any(kind == "code" for kind, _, _ in segments):
        return [("code", text.strip("\n"), answer_language)]
    return segments


def show_markdown(text: str) -> None:
    """Render trusted or untrusted Markdown safely (st.html skips Streamlit's own directives)."""
    st.html(safe_markdown_html(text))


def show_answer(text: str, answer_language: str | None) -> None:
    """One answer: prose as sanitised Markdown, code as highlighted code."""
    for kind, body, language in answer_segments(text, answer_language):
        if kind == "code":
            st.code(body, language=language, wrap_lines=True)
        else:
            show_markdown(body)


@dataclass
class Session:
    """Loaded once per browser session: the run, its log, its answers and comparison pool."""

    config: LabelConfig
    spec: RunSpec
    log: EvidenceLog
    answers: dict[tuple[str, str], Record]
    pool: list[Comparison]
    n: int
    seed: int


def load_session(config: LabelConfig) -> Session:
    """Resolve the run and read its current answers (cached in the session state)."""
    from konkord.stages.label.sample import comparison_pool
    from konkord.stages.run import current_answers

    spec = resolve_run(config.run)
    log = EvidenceLog(spec.run_dir)
    answers = current_answers(log, spec.suite, spec.settings)
    pool = comparison_pool(answers, spec.suite.judged_ids(), spec.models)  # a conversation: its turns
    return Session(
        config=config,
        spec=spec,
        log=log,
        answers=answers,
        pool=pool,
        n=config.n if config.n is not None else spec.label_plan.n,
        seed=config.seed if config.seed is not None else spec.label_plan.seed,
    )


def state() -> Any:
    """Streamlit's session state (typed loosely, as Streamlit types it)."""
    return st.session_state


def current_queue(session: Session) -> LabelQueue:
    """The queue as it stands now, with items skipped in this session left out."""
    labels = current_labels(session.log)
    return label_queue(
        session.pool,
        labels,
        session.config.labeller,
        session.seed,
        session.n,
        overlap=session.config.overlap,
        skip=state().skipped,
    )


def on_choice(session: Session, item: QueueItem, choice: Choice) -> None:
    """Save the label at once; a repeated key press on an item already labelled is ignored."""
    labeller = session.config.labeller
    if item.comparison.label_key(labeller) not in current_labels(session.log):
        from konkord.stages.label.design import inclusion_probabilities

        inclusion = inclusion_probabilities(session.pool, session.n).get(item.comparison)
        record_label(session.log, item.comparison, item.winner_for(choice), labeller,
                     item.shown_first, inclusion_probability=inclusion or None,
                     sample_seed=session.seed)
    state().pinned = None


def on_skip(item: QueueItem) -> None:
    """Leave an item for later: it comes back in the next session."""
    state().skipped.add(item.comparison)
    state().pinned = None


def on_unskip() -> None:
    """Bring back the items skipped in this session."""
    state().skipped.clear()


def on_undo(session: Session) -> None:
    """Withdraw the last label and show its item again."""
    withdrawn = undo_last_label(session.log, session.config.labeller)
    if withdrawn is not None:
        comparison = Comparison(withdrawn["task_id"], withdrawn["model_a"], withdrawn["model_b"])
        state().skipped.discard(comparison)
        state().pinned = comparison


def next_item(session: Session, queue: LabelQueue) -> QueueItem | None:
    """The item to show: an item just undone first, else the head of the queue."""
    pinned: Comparison | None = state().pinned
    if pinned is not None:
        for item in queue.items:
            if item.comparison == pinned:
                return item
    return queue.items[0] if queue.items else None


def show_sidebar(session: Session) -> None:
    """The rubric and the suite's context, always at hand; the keys; who is labelling."""
    suite: Suite = session.spec.suite
    with st.sidebar:
        st.subheader("Rubric")
        show_markdown(suite.rubric)
        if suite.context:
            st.subheader("Context the models were given")
            show_markdown(suite.context)
        st.caption(
            "Keys: 1 = Answer 1 better, 2 = Answer 2 better, 3 or t = about equal, "
            "s = skip, u = undo the last label."
        )
        st.caption(f"Labelling as **{session.config.labeller}**, seed {session.seed}.")


def show_buttons(session: Session, item: QueueItem | None, can_undo: bool) -> None:
    """The five actions, each bound to its key once (Streamlit owns the key listeners)."""
    row = st.container(horizontal=True, key="actions")
    disabled = item is None
    row.button("Answer 1 better", key="choice_1", shortcut="1", type="primary",
               disabled=disabled, on_click=on_choice, args=(session, item, "1"))
    row.button("Answer 2 better", key="choice_2", shortcut="2", type="primary",
               disabled=disabled, on_click=on_choice, args=(session, item, "2"))
    row.button("About equal", key="choice_tie", shortcut="3", disabled=disabled,
               on_click=on_choice, args=(session, item, "tie"))
    row.button("Skip", key="skip", shortcut="S", disabled=disabled, on_click=on_skip,
               args=(item,))
    row.button("Undo", key="undo", shortcut="U", disabled=not can_undo, on_click=on_undo,
               args=(session,))
    # A second, hidden trigger for "about equal" so that t works as well as 3.
    row.button("About equal (t)", key="tie_t", shortcut="T", disabled=disabled,
               on_click=on_choice, args=(session, item, "tie"))


def show_item(session: Session, item: QueueItem) -> None:
    """The task and the two answers side by side, as Answer 1 and Answer 2."""
    suite = session.spec.suite
    task = suite.task(item.comparison.task_id)
    earlier = earlier_turns(suite, task.id)
    for unit, prompt in earlier:
        show_earlier_turn(session, item, unit, prompt)
    with st.container(key="prompt", border=True):
        turn = f", turn {len(earlier) + 1}: the turn to judge" if earlier else ""
        task_line = f'<div class="konkord-task">Task {html.escape(task.id)}{turn}</div>'
        st.html(task_line + safe_markdown_html(task.prompt))
    left, right = st.columns(2, gap="medium")
    for column, number, model in ((left, 1, item.shown_first), (right, 2, item.shown_second)):
        with column:
            st.markdown(f"**Answer {number}**")
            with st.container(key=f"answer_{number}", border=True, height=300):
                answer = session.answers[(task.id, model)]
                show_answer(str(answer["text"]), suite.answer_language)


def earlier_turns(suite: Suite, task_id: str) -> list[tuple[str, str]]:
    """(judged id, user message) of each turn before this one of a conversation; none for a
    task of one prompt or a conversation's first turn."""
    base, turn = split_unit(task_id)
    whole = next((t for t in suite.tasks if t.id == base and t.multi_turn), None)
    if turn is None or whole is None:
        return []
    return [(unit_id(base, k), whole.turns[k - 1].prompt) for k in range(1, turn)]


def show_earlier_turn(session: Session, item: QueueItem, unit: str, prompt: str) -> None:
    """An earlier turn: the user's message, then each side's own reply, in the same columns as
    the answers to judge (Answer 1 on the left), so each conversation reads top to bottom."""
    turn = split_unit(unit)[1]
    with st.container(key=f"earlier_{turn}", border=True):
        st.html(
            f'<div class="konkord-task">Turn {turn}: the user wrote</div>'
            + safe_markdown_html(prompt)
        )
    left, right = st.columns(2, gap="medium")
    for column, number, model in ((left, 1, item.shown_first), (right, 2, item.shown_second)):
        with column:
            st.caption(f"Answer {number}'s conversation: its reply to turn {turn}")
            with st.container(key=f"earlier_{turn}_{number}", border=True, height=200):
                record = session.answers.get((unit, model))
                text = None if record is None else record.get("text")
                show_answer(str(text) if text is not None else "(no reply)", session.spec.suite.answer_language)


def show_finished(session: Session, queue: LabelQueue) -> None:
    """The end of the queue: say so, and what to run next."""
    skipped = len(state().skipped)
    if not session.pool:
        st.warning(
            f"Run {session.spec.name} has no comparisons to label yet (no task has good answers "
            "from two models). Generate answers first:"
        )
        st.code(f"konkord run --run {session.spec.name}", language="bash")
        return
    if skipped and queue.done < session.n:
        st.info(f"You skipped {skipped} item(s) this session and there is nothing else to label.")
        st.button("Show the skipped items again", key="unskip", on_click=on_unskip)
    st.success(
        f"Done: {queue.done} label(s) from {session.config.labeller}. Everything is saved in "
        f"{session.log.path('labels')}. Measure the judge against these labels with:"
    )
    st.code(f"konkord calibrate --run {session.spec.name}", language="bash")


def main() -> None:
    """Draw the page for the current state; Streamlit reruns this after every click or key."""
    import sys

    st.set_page_config(page_title="Konkord: label", layout="wide")
    st.html(PAGE_CSS)
    if "session" not in state():
        config = parse_config(sys.argv[1:], os.environ)
        state().session = load_session(config)
        state().skipped = set()
        state().pinned = None
    session: Session = state().session
    show_sidebar(session)
    labelling(session)


@st.fragment
def labelling(session: Session) -> None:
    """The progress, the item and the buttons. A key or a click reruns this part alone: the
    page's style and the sidebar (rubric, context) stay as drawn, so an answer is answered by
    drawing the next item and nothing else."""
    queue = current_queue(session)
    item = next_item(session, queue)
    st.progress(
        queue.done / queue.total if queue.total else 1.0,
        text=f"{queue.done} of {queue.total} labelled · run {session.spec.name}",
    )
    if item is None:
        show_finished(session, queue)
    else:
        show_item(session, item)
    can_undo = any(
        key[3] == session.config.labeller for key in current_labels(session.log)
    )
    show_buttons(session, item, can_undo)


if __name__ == "__main__":
    main()
