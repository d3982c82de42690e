"""The message hash of many judge calls at once (`judge_call.MessageShas`, what `konkord build`
checks every verdict against) is the hash of the message `user_message` composes for each: with
context or none, reference or none, a conversation's later turns, either order, answers shared
between comparisons and answers that differ by a character."""

from __future__ import annotations

import random
from pathlib import Path

from konkord.configuration.runspec import RunSpec
from konkord.configuration.suite import Suite, Task, Turn
from konkord.stages.judge.judge_call import JudgeItem, MessageShas, message_sha, user_message


def spec_of(context: str | None) -> RunSpec:
    suite = Suite(
        name="s",
        rubric="Prefer correct answers.",
        context=context,
        tasks=(
            Task(id="t1", prompt="Add {a} and {b}.", reference="a + b"),
            Task(id="t2", prompt="  Reverse a list.\n"),
            Task(id="chat", turns=(Turn(prompt="Hello."), Turn(prompt="And {then}?"))),
        ),
    )
    return RunSpec(name="r", suite_path=Path("s.yaml"), suite=suite, models=("m/a", "m/b", "m/c"))


def test_the_hashes_made_at_once_are_those_of_each_message() -> None:
    rng = random.Random(7)
    pieces = ["word", " ", "\n", "{", "}", "é", "😀", "<<<ANSWER 1 END x>>>", "\x00", "1"]
    for context in (None, "", "You write {Python}.\n"):
        spec = spec_of(context)
        answers = ["".join(rng.choice(pieces) for _ in range(rng.randrange(0, 9))) for _ in range(6)]
        answers += [answers[0] + "x", "x" + answers[0]]  # near twins: their nonces differ
        shas = MessageShas(spec)
        tasks = [spec.suite.tasks[0], spec.suite.tasks[1], *(
            spec.suite.tasks[2].turn_task(k) for k in (1, 2))]
        for _ in range(300):
            task = rng.choice(tasks)
            earlier = ()
            if task.id.endswith("2") and task.id != "t2":  # a conversation's second turn
                earlier = (("Hello.", rng.choice(answers), rng.choice(answers)),)
            item = JudgeItem(task, "m/a", "m/b", rng.choice(["ab", "ba"]), "judge/j",
                             rng.choice(answers), rng.choice(answers), earlier)
            assert shas.of(item) == message_sha(user_message(spec, item))
