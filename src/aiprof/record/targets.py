"""What a command's TRACE argument names, and the only code that lists a run or trace directory.

Every command that reads traces resolves its arguments here, so each accepts the same targets:

- a trace file (``.json`` or ``.json.gz``, Kineto/Chrome format);
- a directory of rank traces (the ``*.json[.gz]`` files directly inside; subdirectories may hold
  other runs and are not read), which must be one job: distinct ranks of one world size;
- a run record written by ``aiprof run`` (a directory with ``meta.json``: its
  ``rank<N>.trace.json.gz`` files, nothing else), or ``runs/`` meaning ``runs/latest``;
- ``example:NAME``, a trace shipped with aiprof (``aiprof examples`` lists them).

The layout lives in ``record/`` because the run record's layout is defined here
(``runrecord.py``); ``trace/`` below it reads the files it is given and never lists a folder.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import msgspec

from aiprof.errors import InputError
from aiprof.record.examples import example_path
from aiprof.record.runrecord import CEILINGS_FILE, LATEST_LINK, META_FILE, rank_trace_paths

if TYPE_CHECKING:
    from aiprof.trace import Trace, TraceSet

TRACE_SUFFIXES = (".json", ".json.gz")
NOT_TRACES = frozenset({META_FILE, CEILINGS_FILE})
"""JSON files aiprof writes into a directory beside traces; they are never read as traces."""

TargetKind = Literal["trace", "traces", "run"]
PathLike = str | os.PathLike[str]


@dataclass(frozen=True, kw_only=True)
class Target:
    """One resolved command-line target."""

    given: str
    """As the user wrote it."""
    kind: TargetKind
    """``trace`` (one file), ``traces`` (a directory of rank traces), ``run`` (a run record)."""
    path: Path
    """The file, or the directory after following ``latest``."""
    files: tuple[Path, ...]
    """The trace files it names, sorted."""

    @property
    def run_dir(self) -> Path | None:
        """The run record directory, when the target is one."""
        return self.path if self.kind == "run" else None

    @property
    def ceilings_file(self) -> Path | None:
        """``ceilings.json`` saved into the target's directory by ``aiprof ceilings --save``."""
        if self.kind == "trace":
            return None
        found = self.path / CEILINGS_FILE
        return found if found.is_file() else None


def resolve(target: PathLike) -> Target:
    """What ``target`` names; ``InputError`` in one line when it names no trace."""
    from aiprof.trace.reader import path_kind

    given = os.fspath(target)
    path = example_path(given) or Path(given)
    kind = path_kind(path)  # a device, pipe or unreadable path is one line here
    if kind == "directory" and not (path / META_FILE).is_file() and (path / LATEST_LINK).exists():
        path = (path / LATEST_LINK).resolve()  # a runs/ directory: its newest run record
        kind = path_kind(path)
    if kind == "file":
        return Target(given=given, kind="trace", path=path, files=(path,))
    if (path / META_FILE).is_file():
        files = rank_trace_paths(path)
        if not files:
            raise InputError(f"{path}: this run record holds no trace ({how_it_ended(path)})")
        return Target(given=given, kind="run", path=path, files=files)
    try:
        files = tuple(sorted(p for p in path.iterdir() if _is_trace_file(p)))
    except OSError as error:
        raise InputError(f"{given}: cannot list this directory: {error.strerror}") from None
    if not files:
        runs = [p.name for p in sorted(path.iterdir()) if (p / META_FILE).is_file()]
        hint = (f"it holds run records ({', '.join(runs[:3])}): pass one of them" if runs else
                "pass the trace files, or the directory that holds them")
        raise InputError(f"{given}: no trace files (*.json or *.json.gz) in this directory; {hint}")
    return Target(given=given, kind="traces", path=path, files=files)


def how_it_ended(run_dir: Path) -> str:
    """What a run record's ``meta.json`` says of its end, in a few words."""
    try:
        meta = msgspec.json.decode((run_dir / META_FILE).read_bytes())
    except (OSError, msgspec.DecodeError):
        return f"its {META_FILE} is unreadable"
    ended = meta.get("ended", "unknown") if isinstance(meta, dict) else "unknown"
    if ended == "unknown":
        return "ended: unknown; the run was killed, or is still running"
    notes = meta.get("notes") if isinstance(meta, dict) else None
    note = next((str(n) for n in notes or () if str(n).startswith("no trace")), "")
    return f"ended: {ended}" + (f"; {note}" if note else "")


def _is_trace_file(path: Path) -> bool:
    return path.is_file() and path.name.endswith(TRACE_SUFFIXES) and path.name not in NOT_TRACES


def resolve_all(targets: PathLike | Sequence[PathLike]) -> list[Target]:
    """``resolve`` of one target or of each in a list."""
    items = [targets] if isinstance(targets, (str, os.PathLike)) else list(targets)
    if not items:
        raise InputError("no trace given: pass a trace file, a directory of rank traces or a run")
    return [resolve(item) for item in items]


def load_traces(
    targets: PathLike | Sequence[PathLike],
    *,
    step_annotation: str | None = None,
    workers: int | None = None,
) -> TraceSet:
    """Read every trace the targets name, clocks on a common zero (see ``trace.read_traces``).

    A directory must hold one job: two traces of the same rank, or of different world sizes,
    are two runs, and reading them as one job would be wrong, so that is refused.
    """
    from aiprof.trace.reader import read_traces

    resolved = resolve_all(targets)
    files = [f for t in resolved for f in t.files]
    traces = read_traces(files, step_annotation=step_annotation, workers=workers)
    for target in resolved:
        if len(target.files) > 1:
            names = {str(f) for f in target.files}
            check_one_job(target.given, [t for t in traces if t.path in names])
    return traces


def load_rank(
    target: PathLike, rank: int | None = None, *, step_annotation: str | None = None
) -> tuple[Trace, Target]:
    """One rank's trace (``rank``; default the lowest) of a target, and the resolved target."""
    resolved = resolve(target)
    traces = load_traces(target, step_annotation=step_annotation)
    if rank is None:
        return traces[0], resolved
    for trace in traces:
        if trace.rank == rank:
            return trace, resolved
    ranks = ", ".join(str(r) for r in traces.ranks)
    raise InputError(f"{resolved.given} has no trace of rank {rank} (its ranks: {ranks}); "
                     "pick one with --rank")


def check_one_job(where: str, traces: Sequence[Trace]) -> None:
    """Refuse traces of one directory that cannot be ranks of one job."""
    seen: dict[int, Trace] = {}
    for trace in traces:
        if trace.rank in seen:
            raise InputError(
                f"{where}: {Path(seen[trace.rank].path).name} and {Path(trace.path).name} are "
                f"both rank {trace.rank}, so they are separate runs, not one job; pass one file "
                "at a time (or a directory holding the ranks of one job)")
        seen[trace.rank] = trace
    sizes = {
        Path(t.path).name: t.distributed.world_size
        for t in traces
        if t.distributed is not None and t.distributed.world_size
    }
    if len(set(sizes.values())) > 1:
        shown = ", ".join(f"{name} is one of {size} ranks" for name, size in sizes.items())
        raise InputError(f"{where}: these traces are not one job ({shown}); pass one file at a "
                         "time (or a directory holding the ranks of one job)")
