"""What a name in Konkord may be (run names, task ids): a slug.

Kept apart from the suite's pydantic models so that a command checking a run name on the
command line does not import pydantic or YAML (a current `konkord report` replays without them).
"""

from __future__ import annotations

import re

SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def slug_problem(value: str) -> str:
    """Why a string is not a slug, in the words STYLE.md uses."""
    return f"\"{value}\" is not a slug (use lower case, digits, '-', '_' or '.')"
