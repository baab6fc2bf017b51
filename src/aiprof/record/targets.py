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
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

import msgspec

from aiprof.errors import InputError
from aiprof.record.examples import example_path
from aiprof.record.runrecord import CEILINGS_FILE, LATEST_LINK, META_FILE, rank_trace_paths

if TYPE_CHECKING:
    from aiprof.trace import Trace, TraceSet
    from aiprof.trace.stream import RankClock, TraceStream

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


@overload
def load_traces(
    targets: PathLike | Sequence[PathLike],
    *,
    step_annotation: str | None = None,
    workers: int | None = None,
    stream: Literal[False] = False,
    ray: None = None,
) -> TraceSet: ...


@overload
def load_traces(
    targets: PathLike | Sequence[PathLike],
    *,
    step_annotation: str | None = None,
    workers: int | None = None,
    stream: bool = False,
    ray: str,
) -> TraceStream: ...


@overload
def load_traces(
    targets: PathLike | Sequence[PathLike],
    *,
    step_annotation: str | None = None,
    workers: int | None = None,
    stream: Literal[True],
    ray: str | None = None,
) -> TraceStream: ...


def load_traces(
    targets: PathLike | Sequence[PathLike],
    *,
    step_annotation: str | None = None,
    workers: int | None = None,
    stream: bool = False,
    ray: str | None = None,
) -> TraceSet | TraceStream:
    """Read every trace the targets name, clocks on a common zero (see ``trace.read_traces``).

    A directory must hold one job: two traces of the same rank, or of different world sizes,
    are two runs, and reading them as one job would be wrong, so that is refused.

    ``stream=True`` reads nothing here: it returns a ``TraceStream`` whose ranks are read and
    analysed one by one in worker processes when ``summary``, ``diagnose`` or
    ``analyze_distributed`` is given it; ``ray`` (a Ray cluster's address, "auto", or "" for
    ``ray.init()``'s default) does the same on Ray (``stream_traces``).
    """
    if stream or ray is not None:
        return stream_traces(targets, step_annotation=step_annotation, workers=workers, ray=ray)
    from aiprof.trace.reader import read_traces

    resolved = resolve_all(targets)
    files = [f for t in resolved for f in t.files]
    traces = read_traces(files, step_annotation=step_annotation, workers=workers)
    for target in resolved:
        if len(target.files) > 1:
            names = {str(f) for f in target.files}
            check_one_job(target.given, [t for t in traces if t.path in names])
    return traces


def stream_traces(
    targets: PathLike | Sequence[PathLike],
    *,
    step_annotation: str | None = None,
    workers: int | None = None,
    memory_budget_bytes: int | None = None,
    ray: str | None = None,
) -> TraceStream:
    """The traces the targets name as a ``TraceStream``: read and analysed rank by rank in
    worker processes (or Ray tasks, ``ray``: a cluster address, "auto" or "local"), never
    all in this process; see ``aiprof.trace.stream``."""
    from aiprof.trace.stream import TraceStream

    resolved = resolve_all(targets)
    files = tuple(f for t in resolved for f in t.files)
    jobs = tuple((t.given, frozenset(str(f) for f in t.files)) for t in resolved
                 if len(t.files) > 1)
    return TraceStream(files, step_annotation=step_annotation, workers=workers,
                       memory_budget_bytes=memory_budget_bytes, ray=ray,
                       check=partial(_check_jobs, jobs) if jobs else None)


def _check_jobs(jobs: tuple[tuple[str, frozenset[str]], ...], clocks: Sequence[Any]) -> None:
    for given, names in jobs:
        check_one_job(given, [c for c in clocks if c.path in names])


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


def check_one_job(where: str, traces: Sequence[Trace] | Sequence[RankClock]) -> None:
    """Refuse traces of one directory that cannot be ranks of one job (``Trace`` or, for a
    ``TraceStream``, the ranks' ``RankClock``)."""
    seen: dict[int, Trace | RankClock] = {}
    for trace in traces:
        if trace.rank in seen:
            raise InputError(
                f"{where}: {Path(seen[trace.rank].path).name} and {Path(trace.path).name} are "
                f"both rank {trace.rank}, so they are separate runs, not one job; pass one file "
                "at a time (or a directory holding the ranks of one job)")
        seen[trace.rank] = trace
    sizes = {Path(t.path).name: size for t in traces if (size := _world_size(t))}
    if len(set(sizes.values())) > 1:
        shown = ", ".join(f"{name} is one of {size} ranks" for name, size in sizes.items())
        raise InputError(f"{where}: these traces are not one job ({shown}); pass one file at a "
                         "time (or a directory holding the ranks of one job)")


def _world_size(trace: Trace | RankClock) -> int | None:
    from aiprof.trace.stream import RankClock

    if isinstance(trace, RankClock):
        return trace.world_size
    return trace.distributed.world_size if trace.distributed is not None else None
