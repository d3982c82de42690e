"""The one exception type a user sees: its message is the whole story, no traceback needed."""


class KonkordError(Exception):
    """An error caused by input or environment, reported to the user as one clear message."""


class SuiteError(KonkordError):
    """A suite or runs.json file that cannot be used; the message names file, line and field."""
