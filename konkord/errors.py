"""The one exception type a user sees: its message is the whole story, no traceback needed."""


class KonkordError(Exception):
    """An error caused by input or environment, reported to the user as one clear message."""


class SuiteError(KonkordError):
    """A suite or runs.json file that cannot be used; the message names file, line and field.

    `problems` holds every problem found, one `file:line: field message` each (the message is
    the first, with a count of the others): `konkord validate` lists them all."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [message]


class NotLaunched(KonkordError):
    """A call refused before it was sent (--max-cost, Ctrl-C): nothing was paid and nothing is
    recorded; a rerun makes it."""
