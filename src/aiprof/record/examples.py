"""Small real traces shipped with aiprof: ``aiprof examples`` lists them, ``example:NAME`` reads
one.

Their origin and license are recorded beside them in ``aiprof/data/examples/index.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from aiprof.errors import InputError

PREFIX = "example:"
"""A target written ``example:NAME`` names a shipped example instead of a path."""
INDEX_FILE = "index.json"


@dataclass(frozen=True, kw_only=True)
class Example:
    """One shipped trace (a file) or job (a directory of rank traces)."""

    name: str
    path: Path
    what: str
    origin: str
    license: str

    @property
    def target(self) -> str:
        """How a command line names it."""
        return f"{PREFIX}{self.name}"

    @property
    def size_bytes(self) -> int:
        """Bytes on disk (all files of a directory)."""
        if self.path.is_dir():
            return sum(p.stat().st_size for p in self.path.iterdir() if p.is_file())
        return self.path.stat().st_size


def examples_dir() -> Path:
    """The folder of shipped examples inside the installed package."""
    return Path(str(resources.files("aiprof") / "data" / "examples"))


def examples() -> tuple[Example, ...]:
    """Every shipped example, in the index's order."""
    folder = examples_dir()
    entries = json.loads((folder / INDEX_FILE).read_text(encoding="utf-8"))["examples"]
    return tuple(
        Example(name=e["name"], path=folder / e["path"], what=e["what"], origin=e["origin"],
                license=e["license"])
        for e in entries
    )


def example(name: str) -> Example:
    """The example called ``name``; ``InputError`` naming the known ones otherwise."""
    known = examples()
    for item in known:
        if item.name == name:
            return item
    names = ", ".join(e.name for e in known)
    raise InputError(f"no example named {name!r}; the shipped examples are {names} "
                     "(see 'aiprof examples')")


def example_path(target: str) -> Path | None:
    """The path of ``example:NAME``; None when ``target`` is not written that way."""
    if not target.startswith(PREFIX):
        return None
    return example(target[len(PREFIX):]).path
