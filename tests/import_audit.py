"""Konkord's import graph, read from the source: circles and private names reached across modules.

Run as a script (`python tests/import_audit.py`) it prints both lists; tests/test_layers.py
asserts they are empty. Every import counts, wherever it sits: at module level, inside a
function, or under `if TYPE_CHECKING:`. A circle is a strongly connected set of two or more
modules; a private import is `from konkord.x import _name` (or `module._name` on an imported
konkord module) from any module other than x itself. Dunders (`__version__`) are public.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def modules(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under the package."""
    found = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@dataclass(frozen=True)
class Graph:
    edges: dict[str, set[str]]
    private: list[tuple[str, str, str]]  # (importer, imported module, name)


def _base(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    if path.name != "__init__.py":
        parts.pop()
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _imports(module: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, str | None]]:
    """(imported module, private name or None) for every konkord import in one file."""
    tree = ast.parse(path.read_text(), str(path))
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield alias.name, None
                    if alias.asname:
                        aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, path, node)
            if base not in known:
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in known:
                    yield full, None
                    aliases[alias.asname or alias.name] = full
                else:
                    yield base, alias.name if _private(alias.name) else None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and _private(node.attr)
        ):
            yield aliases[node.value.id], node.attr


def graph(package_dir: Path = ROOT / "konkord") -> Graph:
    known = modules(package_dir)
    edges: dict[str, set[str]] = {m: set() for m in known}
    private = []
    for module, path in known.items():
        for target, name in _imports(module, path, known):
            if target == module:
                continue
            edges[module].add(target)
            if name is not None:
                private.append((module, target, name))
    return Graph(edges, sorted(set(private)))


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of two or more modules (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def main() -> int:
    package_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "konkord"
    g = graph(package_dir)
    loops = circles(g.edges)
    print(f"circles: {len(loops)}")
    for loop in loops:
        print("  " + " <-> ".join(loop))
    print(f"private cross-module imports: {len(g.private)}")
    for importer, target, name in g.private:
        print(f"  {importer} imports {target}.{name}")
    return 1 if loops or g.private else 0


if __name__ == "__main__":
    sys.exit(main())
