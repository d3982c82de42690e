"""Credentials: where they come from (.env, the environment) and how they are kept out of files.

Everything Konkord stores or prints that could carry a key goes through redact().
"""

from __future__ import annotations

import os
import re
from pathlib import Path

SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
SECRET_SHAPE = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{8,}")


def load_dotenv_file(path: Path | str = ".env") -> None:
    """Read credentials from .env in the working directory; a variable set in the shell wins."""
    if Path(path).is_file():
        from dotenv import load_dotenv

        load_dotenv(path, override=False)


def secret_values() -> list[tuple[str, str]]:
    """(name, value) of every environment variable that looks like a credential."""
    return [
        (name, value)
        for name, value in os.environ.items()
        if len(value) >= 8 and SECRET_ENV.search(name)
    ]


def redact(
    text: str, key_shapes: bool = True, secrets: list[tuple[str, str]] | None = None
) -> str:
    """Remove credentials from text that will be stored or shown.

    The values of secret-looking environment variables are always replaced by the variable's
    name; with key_shapes, so is anything shaped like an API key (sk-...). Model answers get
    only the first: a server that echoes the key must not put it in the evidence, but an
    answer's code may legitimately contain "sk-" strings.
    """
    for name, value in secret_values() if secrets is None else secrets:
        if value in text:
            text = text.replace(value, f"[{name}]")
    return SECRET_SHAPE.sub("[redacted]", text) if key_shapes else text
