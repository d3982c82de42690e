"""A build writes into a staging copy of the site and swaps it in at the end, so a build that
fails (a template error, a bad results file, Ctrl-C) leaves the previous site as it was.

The copy is made of hard links: pages are rewritten by rename (konkord.atomic), never in place,
so a link shared with the old site is replaced in the copy and left alone in the original.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _link_tree(source: Path, target: Path) -> None:
    """`target` as a copy of `source` made of hard links (real copies where links fail)."""
    for folder, dirs, files in os.walk(source):
        here = target / Path(folder).relative_to(source)
        here.mkdir(parents=True, exist_ok=True)
        for name in dirs:
            (here / name).mkdir(exist_ok=True)
        for name in files:
            try:
                os.link(Path(folder) / name, here / name)
            except OSError:
                shutil.copy2(Path(folder) / name, here / name)


@contextmanager
def staged_site(out: Path) -> Iterator[Path]:
    """A folder beside `out` holding a copy of it to build into; swapped in for `out` when the
    block ends normally, removed (and `out` untouched) when it raises."""
    site = out.resolve() if out.is_symlink() else out
    staging = site.with_name(f".{site.name}.building-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        if site.is_dir():
            _link_tree(site, staging)
        else:
            staging.mkdir(parents=True)
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    old = site.with_name(f".{site.name}.old-{os.getpid()}")
    if site.is_dir():
        os.rename(site, old)
    os.rename(staging, site)
    shutil.rmtree(old, ignore_errors=True)
