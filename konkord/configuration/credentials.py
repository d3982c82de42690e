"""Credentials: where they come from (.env, the environment) and how they are kept out of files.

Everything Konkord stores or prints that could carry a key goes through redact().
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
SECRET_SHAPE = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{8,}")
# Query parameters that carry credentials: api-key, key, access_token, sig, password, ...
SECRET_PARAM = re.compile(r"(key|token|secret|passw|pwd|auth|sig|credential|session)", re.I)
URL_IN_TEXT = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>`]+")
URL_SECRET_NAME = "credential from a URL"
_url_secrets: dict[str, str] = {}  # values stripped from URLs this process used


def load_dotenv_file(path: Path | str = ".env") -> None:
    """Read credentials from .env in the working directory; a variable set in the shell wins.

    An empty line such as `ANTHROPIC_API_KEY=` (as .env.example has them) sets nothing: litellm
    counts any variable present as a key, so an empty one would let calls go out and fail.
    """
    if Path(path).is_file():
        from dotenv import dotenv_values

        for name, value in dotenv_values(path).items():
            if value and not os.environ.get(name):
                os.environ[name] = value


@contextmanager
def empty_credentials_unset() -> Iterator[None]:
    """For the span of a check, hide credential variables that are set but empty (no key)."""
    empty = {n: v for n, v in os.environ.items() if not v.strip() and SECRET_ENV.search(n)}
    for name in empty:
        del os.environ[name]
    try:
        yield
    finally:
        os.environ.update(empty)


def secret_values() -> list[tuple[str, str]]:
    """(name, value) of every environment variable that looks like a credential, and of every
    credential stripped from a URL this process used (a server may echo its own URL)."""
    found = [
        (name, value)
        for name, value in os.environ.items()
        if len(value) >= 8 and SECRET_ENV.search(name)
    ]
    return found + [(URL_SECRET_NAME, value) for value in _url_secrets]


def strip_url_credentials(url: str) -> str:
    """The URL without its user:password@ part and without query parameters named like keys.

    The values taken out are remembered, so redact() also removes them wherever they show up
    (an error message quoting the URL). A URL with nothing to strip comes back unchanged.
    """
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:  # not a URL one can take apart: keep only what precedes any secret
        return re.sub(r"//[^/@\s]*@", "//", url).split("?")[0]
    found: list[str] = []
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, netloc = netloc.rpartition("@")
        found.append(userinfo.split(":", 1)[-1])  # the password, or a lone token as user
    kept = []
    for name, value in query:
        if SECRET_PARAM.search(name) or SECRET_SHAPE.search(value):
            found.append(value)
        else:
            kept.append((name, value))
    if not found and netloc == parts.netloc:
        return url
    for value in found:
        if len(value) >= 8:  # as for environment variables: short values are not keys
            _url_secrets[value] = URL_SECRET_NAME
    query_text = urlencode(kept)
    return urlunsplit((parts.scheme, netloc, parts.path, query_text, parts.fragment))


URL_CREDENTIALS_PROBLEM = (
    "holds credentials (user:password@ or a key in the query string), which Konkord does not "
    "send: give the address alone (e.g. http://127.0.0.1:8000/v1) and put the key in "
    "OPENAI_API_KEY or the provider's key variable (in the shell or .env)"
)


def url_credentials_problem(url: str | None) -> str | None:
    """Why a server address cannot be used, when it carries credentials; None when it is fine.

    litellm's HTTP clients cannot send them: user:password@ collides with the key's
    Authorization header, and a query string ends up in the middle of the request path. So
    they are refused before anything is sent, naming the stripped address only."""
    if not has_url_credentials(url):
        return None
    return f"{strip_url_credentials(str(url))} {URL_CREDENTIALS_PROBLEM}"


def has_url_credentials(url: str | None) -> bool:
    """Whether a URL carries something strip_url_credentials() would take out."""
    return bool(url) and strip_url_credentials(str(url)) != url


def redact(text: str, key_shapes: bool = True, secrets: list[tuple[str, str]] | None = None) -> str:
    """Remove credentials from text that will be stored or shown.

    The values of secret-looking environment variables (and credentials stripped from URLs)
    are always replaced by the variable's name; with key_shapes, so is anything shaped like an
    API key (sk-...), and URLs lose their credentials. Model answers get only the first: a
    server that echoes the key must not put it in the evidence, but an answer's code may
    legitimately contain "sk-" strings and URLs.
    """
    if key_shapes:
        text = URL_IN_TEXT.sub(lambda found: strip_url_credentials(found.group()), text)
    for name, value in secret_values() if secrets is None else secrets:
        if value in text:
            text = text.replace(value, f"[{name}]")
    return SECRET_SHAPE.sub("[redacted]", text) if key_shapes else text
