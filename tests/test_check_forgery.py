"""Forged passes: answers that do not implement the function but try to be recorded as passing.

The verdict is decided by the harness outside the sandbox, from plain data that crossed the
line, so each of these must be recorded as a failure, while a correct answer passes.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from konkord.checks.runner import run_tests
from konkord.checks.sandbox import Limits, bwrap_path
from konkord.cli import cli
from konkord.configuration.runspec import RunSpec, write_manifest
from konkord.configuration.suite import load_suite
from konkord.evidence.log import EvidenceLog, now_iso
from konkord.stages.run import answer_key_hash, answer_messages

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap (bwrap) is not installed"),
]

# Answers that should run normally get a wall limit no loaded machine reaches; the forgeries,
# which must fail whatever happens, a short one (several of them sleep forever).
LIMITS = Limits(wall_s=120.0, cpu_s=3, memory_mb=256, processes=16, output_bytes=200_000)
SHORT_WALL = replace(LIMITS, wall_s=5.0)
GOOD = "def add(a, b):\n    return a + b\n"
TESTS = "assert add(2, 3) == 5\nassert add(-1, 1) == 0\n"
SPRAY = (
    "import os\n"
    "for fd in range(3, 20):\n"
    "    try:\n"
    "        os.write(fd, b'{\"ok\": true}\\n')\n"
    "    except OSError:\n"
    "        pass\n"
)
FORGERIES = {
    "status-fd-then-os-exit": SPRAY + "os._exit(0)\n",
    "status-fd-then-sys-exit": SPRAY + "raise SystemExit(0)\n",
    "status-fd-spray-and-carry-on": SPRAY,
    "replace-builtins-exec": "import builtins\nbuiltins.exec = lambda *a, **k: None\n",
    "replace-json-dumps": "import json\njson.dumps = lambda *a, **k: '{\"ok\": true}'\n",
    "print-fake-results": (
        "print('{\"ok\": true}')\nprint('{\"op\": \"return\", \"value\": 5}')\n"
        "print('2 passed in 0.01s')\n"
    ),
    "system-exit-0": "raise SystemExit(0)\n",
    "exit-inside-the-call": "import sys\ndef add(a, b):\n    sys.exit(0)\n",
    "keyboard-interrupt-inside-the-call": "def add(a, b):\n    raise KeyboardInterrupt\n",
    "os-exit-inside-the-call": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "rigged-int-subclass": (
        "class Liar(int):\n    def __eq__(self, other):\n        return True\n"
        "    __hash__ = int.__hash__\n"
        "def add(a, b):\n    return Liar(0)\n"
    ),
    "rigged-int-subclass-int-too": (
        "class Liar(int):\n    def __eq__(self, other):\n        return True\n"
        "    def __int__(self):\n        return 5\n    __hash__ = int.__hash__\n"
        "def add(a, b):\n    return Liar(0)\n"
    ),
    "rigged-object": (
        "class Anything:\n    def __eq__(self, other):\n        return True\n"
        "def add(a, b):\n    return Anything()\n"
    ),
    "patch-the-worker-to-answer-5": (
        "import sys\nwire = sys.modules['wire']\n"
        "def serve(self, message):\n    self.send({'op': 'return', 'value': 5})\n"
        "wire.Channel.serve = serve\n"
    ),
    "patch-the-worker-to-send-an-object": (
        "import sys\nwire = sys.modules['wire']\n"
        "def serve(self, message):\n"
        "    self.send({'op': 'return', 'value': {'__eq__': True, 'ok': True}})\n"
        "wire.Channel.serve = serve\ndef add(a, b):\n    return 0\n"
    ),
    "forged-replies-written-ahead": (
        "import os\n"
        "for fd in range(3, 40):\n"
        "    try:\n"
        "        os.write(fd, b'{\"op\": \"ready\", \"names\": {}}\\n')\n"
        "    except OSError:\n"
        "        pass\n"
    ),
    "garbage-on-every-descriptor-inside-the-call": (
        "import os\ndef add(a, b):\n"
        "    for fd in range(3, 40):\n"
        "        try:\n"
        "            os.write(fd, b'\\x00garbage\\n')\n"
        "        except OSError:\n"
        "            pass\n"
        "    return a + b + 1\n"
    ),
    "close-every-descriptor": (
        "import os\nos.closerange(3, 1024)\ndef add(a, b):\n    return a + b\n"
    ),
    "infinite-loop-in-the-call": "def add(a, b):\n    while True:\n        pass\n",
    "huge-reply": "def add(a, b):\n    return 'x' * 40_000_000\n",
    "deep-reply": "def add(a, b):\n    x = []\n    for _ in range(100_000):\n        x = [x]\n    return x\n",
    "huge-output": "import sys\nfor _ in range(1000):\n    sys.stdout.write('{\"ok\": true}' * 10_000)\n",
    "sleep-forever": "import time\ntime.sleep(1_000_000)\n",
    "sleep-forever-in-the-call": "import time\ndef add(a, b):\n    time.sleep(1_000_000)\n",
    "kill-the-parent": (
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\ndef add(a, b):\n    return 0\n"
    ),
    "kill-the-sandbox-init-in-the-call": (
        "import os, signal\ndef add(a, b):\n    os.kill(1, signal.SIGKILL)\n    return 0\n"
    ),
    "fork-bomb": (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    ),
    "fork-a-child-that-forges": (  # the status descriptor is out of reach of every process
        "import os, time\nif os.fork() == 0:\n    for _ in range(50):\n"
        "        for fd in range(3, 40):\n            try:\n"
        "                os.write(fd, b'{\"ok\": true}')\n"
        "            except OSError:\n                pass\n"
        "        time.sleep(0.01)\n    os._exit(0)\n"
        "def add(a, b):\n    return 0\n"
    ),
    "answer-from-the-tests-file": (
        "import glob, re\ntable = {}\n"
        "for path in glob.glob('/tmp/**/tests.py', recursive=True) + ['/run/konkord/tests.py']:\n"
        "    try:\n        text = open(path).read()\n    except OSError:\n        continue\n"
        "    for a, b, r in re.findall(r'add\\((-?\\d+), (-?\\d+)\\) == (-?\\d+)', text):\n"
        "        table[(int(a), int(b))] = int(r)\n"
        "def add(a, b):\n    return table[(a, b)]\n"
    ),
    "patch-the-harness-and-assertion-error": (
        "import builtins, sys\nsys.path.insert(0, '/run/konkord')\n"
        "try:\n    import harness\n    harness.report = lambda fd, status: harness.os._exit(0)\n"
        "except ImportError:\n    pass\n"
        "builtins.AssertionError = type('NotAnError', (Exception,), {})\n"
        "builtins.__import__ = None\n"
        "def add(a, b):\n    return 0\n"
    ),
    "return-a-handle-to-the-tests-own-value": (
        "import sys\nwire = sys.modules['wire']\n"
        "def serve(self, message):\n    self.send({'op': 'return', 'value': {'back': 1}})\n"
        "wire.Channel.serve = serve\ndef add(a, b):\n    return 0\n"
    ),
}


def result_of(answer: str, tests: str = TESTS, limits: Limits = LIMITS) -> tuple[bool, str]:
    result = run_tests(answer, tests, limits, "bwrap")
    return result.passed, result.reason or ""


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forged_pass_is_recorded_as_a_failure(name: str) -> None:
    passed, reason = result_of(FORGERIES[name], limits=SHORT_WALL)
    assert not passed, f"{name} forged a pass"
    assert reason


def test_the_correct_answer_passes() -> None:
    assert result_of(GOOD) == (True, "")


def test_exit_during_a_call_fails_even_when_the_tests_catch_everything() -> None:
    swallowing = "try:\n    add(2, 3)\nexcept BaseException:\n    pass\n"
    assert result_of(GOOD, swallowing) == (True, "")
    passed, reason = result_of(FORGERIES["exit-inside-the-call"], swallowing)
    assert not passed
    assert reason == "the answer's code raised SystemExit(0) during the tests"


@pytest.mark.parametrize("name", ["rigged-int-subclass", "rigged-int-subclass-int-too"])
def test_a_rigged_int_crosses_as_its_true_value(name: str) -> None:
    # Liar(0) crosses as 0, even when its own __int__ says 5: the tests see add(2, 3) == 0.
    assert result_of(FORGERIES[name]) == (
        False, "test failed at tests.py line 1: assert add(2, 3) == 5")


def test_the_answer_cannot_set_attributes_on_the_tests_objects() -> None:
    answer = (
        "def mark(box):\n    try:\n        box.flag = 1\n    except AttributeError:\n"
        "        return 'refused'\n    return 'set'\n"
    )
    tests = (
        "class Box:\n    pass\nbox = Box()\nassert mark(box) == 'refused'\n"
        "assert not hasattr(box, 'flag')\n"
    )
    assert result_of(answer, tests) == (True, "")


def test_the_answer_cannot_redefine_the_builtins_the_tests_use() -> None:
    tests = "assert len(items(3)) == 3\nassert isinstance(items(1), list)\n"
    assert result_of("def items(n):\n    return [0] * n\n", tests) == (True, "")
    rigged = "def items(n):\n    return 'no'\ndef len(x):\n    return 3\n"
    assert result_of(rigged, tests) == (
        False, "test failed at tests.py line 1: assert len(items(3)) == 3")
    rigged = "def items(n):\n    return 'no'\ndef isinstance(x, kind):\n    return True\n"
    assert not result_of(rigged, tests.replace("len(items(3)) == 3", "items(3)"))[0]


def test_the_answer_cannot_read_the_tests_or_reach_into_the_tests_objects() -> None:
    answer = (
        "import os\n"
        "def probe(callback):\n"
        "    found = [p for p in ('/run/konkord/tests.py', 'tests.py') if os.path.exists(p)]\n"
        "    for name in ('__globals__', '__code__', '__closure__'):\n"
        "        try:\n"
        "            getattr(callback, name)\n"
        "            found.append(name)\n"
        "        except AttributeError:\n"
        "            pass\n"
        "    return found, callback(20)\n"
    )
    tests = "assert probe(lambda v: v + 1) == ([], 21)\n"
    assert result_of(answer, tests) == (True, "")


def test_mutating_an_argument_is_seen_by_the_tests() -> None:
    tests = "items = [3, 1, 2]\nresult = smallest(items)\nassert result == 1\nassert items == [3, 1, 2]\n"
    assert result_of("def smallest(items):\n    return min(items)\n", tests) == (True, "")
    sorting = "def smallest(items):\n    items.sort()\n    return items[0]\n"
    assert result_of(sorting, tests) == (
        False, "test failed at tests.py line 4: assert items == [3, 1, 2]")


def test_a_returned_argument_is_the_same_object_and_a_copy_is_not() -> None:
    tests = "given = [1, 2]\nassert copy(given) == given and copy(given) is not given\n"
    assert result_of("def copy(items):\n    return list(items)\n", tests) == (True, "")
    passed, _ = result_of("def copy(items):\n    return items\n", tests)
    assert not passed


def test_objects_of_the_tests_stay_in_the_tests_and_count_what_the_answer_does() -> None:
    tests = (
        "class Counting(list):\n"
        "    reads = 0\n"
        "    def __getitem__(self, index):\n"
        "        Counting.reads += 1\n"
        "        return super().__getitem__(index)\n"
        "assert total(Counting([1, 2, 3])) == 6\n"
        "assert Counting.reads == 3, Counting.reads\n"
    )
    indexing = "def total(items):\n    return sum(items[i] for i in range(len(items)))\n"
    assert result_of(indexing, tests) == (True, "")
    twice = "def total(items):\n    return sum(items[i] for i in range(len(items))) + 0 * items[0]\n"
    assert not result_of(twice, tests)[0]


def test_classes_exceptions_and_tuples_cross() -> None:
    answer = (
        "from collections import OrderedDict\n"
        "class Stack:\n"
        "    def __init__(self):\n        self.items = OrderedDict()\n"
        "    def push(self, value):\n        self.items[len(self.items)] = value\n"
        "    def pop(self):\n"
        "        if not self.items:\n            raise IndexError('empty')\n"
        "        return self.items.popitem()[1]\n"
        "    def __len__(self):\n        return len(self.items)\n"
    )
    tests = (
        "s = Stack()\ns.push((1, 'a'))\nassert len(s) == 1\nassert s.pop() == (1, 'a')\n"
        "try:\n    s.pop()\nexcept IndexError as error:\n    assert str(error) == 'empty'\n"
        "else:\n    raise AssertionError('no IndexError')\n"
        "assert OrderedDict is __import__('collections').OrderedDict\n"
    )
    assert result_of(answer, tests) == (True, "")


SUITE = """\
name: forged
answer_language: python
rubric: Correct code wins.
tasks:
  - id: add
    prompt: Write add(a, b).
    checks: [tests]
    tests: |
      assert add(2, 3) == 5
      assert add(-1, 1) == 0
"""


def copy_another_answer(project: Path) -> str:
    """An answer that takes the correct answer from the run's own evidence, were it visible."""
    return (
        "import json\n"
        f"for line in open({str(project / 'runs' / 'forged' / 'answers.jsonl')!r}):\n"
        "    record = json.loads(line)\n"
        "    if record['model'] == 'm/good':\n"
        "        exec(record['text'].split('```python\\n')[1].split('```')[0])\n"
    )


def test_konkord_check_records_every_forgery_as_a_failure(project: Path) -> None:
    """Every forgery above, and one copying the correct answer from the project, as answers
    of one run: `konkord check` records each as a failure and the correct answer as passing."""
    (project / "forged.yaml").write_text(SUITE)
    answers = {"m/good": GOOD, "m/copy-another-answer": copy_another_answer(project),
               **{f"m/{name}": code for name, code in FORGERIES.items()}}
    spec = RunSpec(name="forged", suite_path=Path("forged.yaml"),
                   suite=load_suite("forged.yaml"), models=tuple(sorted(answers)))
    write_manifest(spec)
    task = spec.suite.task("add")
    for model, code in answers.items():
        EvidenceLog(spec.run_dir).append("answers", {
            "kind": "answer", "task_id": "add", "model": model,
            "settings_hash": answer_key_hash(answer_messages(spec.suite, task), spec.settings),
            "text": f"```python\n{code}```\n", "error": None, "created_at": now_iso(),
        })  # fmt: skip
    assert "m/good" in (spec.run_dir / "answers.jsonl").read_text()  # there to be copied
    result = CliRunner().invoke(cli, ["check", "--run", "forged"])
    assert result.exit_code == 0, result.output
    lines = (spec.run_dir / "checks.jsonl").read_text().splitlines()
    passed = {r["model"]: r["passed"] for r in map(json.loads, lines)}
    assert passed == {model: model == "m/good" for model in answers}
    assert f"checked {len(answers)} (passed 1, failed {len(answers) - 1})" in result.stdout


# Issue 24: the tests' builtins, their live objects and big integers.
RIG_THE_BUILTINS = (  # sends `__builtins__` with the ready message: every builtin says yes
    "import sys\nwire = sys.modules['wire']\nsend = wire.Channel.send\n"
    "class FakeMath:\n    def isclose(self, *args, **kwargs):\n        return True\n"
    "def rigged(self, message):\n"
    "    if message.get('op') == 'ready':\n"
    "        import builtins\n"
    "        fake = dict(vars(builtins))\n"
    "        fake.update(all=lambda *a: True, any=lambda *a: True, len=lambda x: 3,\n"
    "                    isinstance=lambda *a: True, __import__=lambda *a, **k: FakeMath())\n"
    "        message['names']['__builtins__'] = self.encode(fake)\n"
    "    send(self, message)\n"
    "wire.Channel.send = rigged\n"
    "def items(n):\n    return 'no'\n"
    "def area(r):\n    return 0.0\n"
)
BUILTIN_TESTS = (
    "assert len(items(3)) == 3\nassert isinstance(items(1), list)\n"
    "assert all(x == 0 for x in items(2))\nimport math\nassert math.isclose(area(1), 3.14159, rel_tol=1e-5)\n"
)
BUILTIN_GOOD = "import math\ndef items(n):\n    return [0] * n\ndef area(r):\n    return math.pi * r * r\n"
READ_THE_GENERATOR = (  # the tests' generator's frame holds their expected value
    "def total(values):\n"
    "    return values.gi_frame.f_globals['expected']\n"
)
GENERATOR_TESTS = "expected = 55\nassert total(x for x in range(11)) == expected\n"
GENERATOR_GOOD = "def total(values):\n    first = next(values)\n    return first + sum(values)\n"
BIG_GOOD = "import math\ndef factorial(n):\n    return math.factorial(n)\ndef same(n):\n    return n\n"
BIG_TESTS = (
    "import math\nassert factorial(2000) == math.factorial(2000)\n"
    "assert same(10 ** 5000 + 1) == 10 ** 5000 + 1\n"
)


def test_the_answer_cannot_send_the_tests_their_builtins() -> None:
    assert result_of(BUILTIN_GOOD, BUILTIN_TESTS) == (True, "")
    assert result_of(RIG_THE_BUILTINS, BUILTIN_TESTS) == (
        False, "test failed at tests.py line 1: assert len(items(3)) == 3")
    # Every other builtin the forgery replaced is the harness's own too.
    for line in BUILTIN_TESTS.splitlines()[1:3]:
        assert not result_of(RIG_THE_BUILTINS, line)[0], line
    assert not result_of(RIG_THE_BUILTINS, "import math\nassert math.isclose(area(1), 3.14159, rel_tol=1e-5)\n")[0]


def test_only_names_the_tests_use_cross_and_never_a_dunder() -> None:
    answer = "def add(a, b):\n    return a + b\nhidden = 1\n"
    tests = "assert add(1, 2) == 3\nassert 'hidden' not in globals()\n"
    assert result_of(answer, tests) == (True, "")
    tests = "assert add(1, 2) == 3\nassert hidden == 1\n"
    assert result_of(answer, tests) == (True, "")
    sends_name = (
        "import sys\nwire = sys.modules['wire']\nsend = wire.Channel.send\n"
        "def rigged(self, message):\n"
        "    if message.get('op') == 'ready':\n"
        "        message['names']['__name__'] = '__main__'\n"
        "    send(self, message)\n"
        "wire.Channel.send = rigged\n"
    )
    assert result_of(sends_name, "assert __name__ == '__konkord_tests__'\n") == (True, "")


def test_a_generator_of_the_tests_crosses_as_data() -> None:
    assert result_of(GENERATOR_GOOD, GENERATOR_TESTS) == (True, "")
    assert result_of(READ_THE_GENERATOR, GENERATOR_TESTS) == (
        False,
        "AttributeError from the answer's code at tests.py line 2: assert total(x for x in "
        "range(11)) == expected: 'list_iterator' object has no attribute 'gi_frame'",
    )


def test_a_frame_of_the_tests_is_never_shown_to_the_answer() -> None:
    answer = "def peek(coroutine):\n    return coroutine.cr_frame.f_globals['expected']\n"
    tests = (
        "expected = 7\nasync def later():\n    return 1\nc = later()\n"
        "try:\n    assert peek(c) == expected\nfinally:\n    c.close()\n"
    )
    assert result_of(answer, tests) == (
        False, "AttributeError from the answer's code at tests.py line 6: "
        "assert peek(c) == expected: attribute 'cr_frame' is not shared")


def test_an_endless_iterator_of_the_tests_is_refused_with_its_reason() -> None:
    tests = "import itertools\nassert first(itertools.count()) == 0\n"
    passed, reason = result_of("def first(values):\n    return next(values)\n", tests)
    assert not passed
    assert reason == (
        "ValueError in the tests at tests.py line 2: assert first(itertools.count()) == 0: "
        "an iterator of more than 1000000 items cannot cross to the answer (pass a list)")


def test_integers_of_any_size_cross_but_the_code_keeps_its_limit() -> None:
    assert result_of(BIG_GOOD, BIG_TESTS) == (True, "")
    tests = "assert digits(10 ** 5000) == 5001\n"
    passed, reason = result_of("def digits(n):\n    return len(str(n))\n", tests)
    assert not passed
    assert "Exceeds the limit (4300 digits)" in reason


HOSTILE_SUITE = """\
name: hostile
answer_language: python
rubric: Correct code wins.
tasks:
  - id: builtins
    prompt: Write items(n) and area(r).
    checks: [tests]
    tests: |
{builtins}
  - id: generator
    prompt: Write total(values).
    checks: [tests]
    tests: |
{generator}
  - id: big
    prompt: Write factorial(n) and same(n).
    checks: [tests]
    tests: |
{big}
"""


def test_konkord_check_records_the_hostile_answers_of_issue_24_as_failures(project: Path) -> None:
    """Through the real command: the rigged builtins and the generator reader fail with their
    reasons; the correct answers, factorial(2000) included, pass."""
    def indent(text: str) -> str:
        return "\n".join("      " + line for line in text.splitlines())

    (project / "hostile.yaml").write_text(HOSTILE_SUITE.format(
        builtins=indent(BUILTIN_TESTS), generator=indent(GENERATOR_TESTS),
        big=indent(BIG_TESTS)))
    answers = {
        "builtins": {"m/good": BUILTIN_GOOD, "m/hostile": RIG_THE_BUILTINS},
        "generator": {"m/good": GENERATOR_GOOD, "m/hostile": READ_THE_GENERATOR},
        "big": {"m/good": BIG_GOOD, "m/hostile": "def factorial(n):\n    return 1\n"},
    }
    spec = RunSpec(name="hostile", suite_path=Path("hostile.yaml"),
                   suite=load_suite("hostile.yaml"), models=("m/good", "m/hostile"))
    write_manifest(spec)
    for task_id, by_model in answers.items():
        task = spec.suite.task(task_id)
        for model, code in by_model.items():
            EvidenceLog(spec.run_dir).append("answers", {
                "kind": "answer", "task_id": task_id, "model": model,
                "settings_hash": answer_key_hash(answer_messages(spec.suite, task), spec.settings),
                "text": f"```python\n{code}```\n", "error": None, "created_at": now_iso(),
            })  # fmt: skip
    result = CliRunner().invoke(cli, ["check", "--run", "hostile"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (spec.run_dir / "checks.jsonl").read_text().splitlines()]
    outcome = {(r["task_id"], r["model"]): (r["passed"], r["reason"]) for r in records}
    assert outcome == {
        ("builtins", "m/good"): (True, None),
        ("builtins", "m/hostile"): (
            False, "test failed at tests.py line 1: assert len(items(3)) == 3"),
        ("generator", "m/good"): (True, None),
        ("generator", "m/hostile"): (
            False, "AttributeError from the answer's code at tests.py line 2: assert total(x for "
            "x in range(11)) == expected: 'list_iterator' object has no attribute 'gi_frame'"),
        ("big", "m/good"): (True, None),
        ("big", "m/hostile"): (
            False, "test failed at tests.py line 2: assert factorial(2000) == "
            "math.factorial(2000)"),
    }
