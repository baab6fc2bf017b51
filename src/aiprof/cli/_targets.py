"""The TRACE arguments every trace-reading command shares, with the same words and options."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiprof.record.targets import PathLike, Target
    from aiprof.trace import Trace, TraceSet
    from aiprof.trace.stream import TraceStream

TARGET_HELP = (
    "a trace file (.json/.json.gz), a directory of rank traces, a run record from "
    "'aiprof run' (runs/ means runs/latest), or example:NAME (see 'aiprof examples')"
)


def add_target_argument(parser: argparse.ArgumentParser, name: str = "target",
                        *, many: bool = False) -> None:
    """The positional TRACE argument (``many``: one or more)."""
    parser.add_argument(name, metavar="TRACE", nargs="+" if many else None, help=TARGET_HELP)
    add_quiet_argument(parser)


def add_quiet_argument(parser: argparse.ArgumentParser) -> None:
    """``--quiet``: no progress line."""
    parser.add_argument("--quiet", action="store_true",
                        help="no progress line on stderr (it only shows in a terminal, for work "
                             "longer than a second)")


def busy(args: argparse.Namespace, label: str) -> AbstractContextManager[None]:
    """A progress line for ``label`` unless ``--quiet`` or stderr is not a terminal."""
    from aiprof.report.progress import busy as show
    from aiprof.report.progress import wanted

    return show(label, enabled=wanted(getattr(args, "quiet", False)))


def load_traces(args: argparse.Namespace, targets: PathLike | Sequence[PathLike], *,
                step_annotation: str | None = None) -> TraceSet:
    """``aiprof.record.targets.load_traces`` with a progress line."""
    from aiprof.record.targets import load_traces as load

    with busy(args, "reading traces"):
        return load(targets, step_annotation=step_annotation)


def add_ray_argument(parser: argparse.ArgumentParser) -> None:
    """``--ray [ADDRESS]``: the ranks read and analysed as tasks of a Ray cluster."""
    parser.add_argument(
        "--ray", nargs="?", const="", metavar="ADDRESS",
        help="read and analyse each rank as a Ray task: ADDRESS is the cluster's (host:port, "
             "ray://host:10001, auto); none: $RAY_ADDRESS, else a Ray started here. The trace "
             "paths must be the same on every node. Needs pip install 'aiprof[ray]'")


def load_ranks(args: argparse.Namespace, targets: PathLike | Sequence[PathLike], *,
               step_annotation: str | None = None) -> TraceSet | TraceStream:
    """What a command that analyses every rank reads: a ``TraceStream`` (each rank read and
    analysed in a worker process, or a Ray task with ``--ray``) when the targets hold several
    traces or ``--ray`` is given, else the one trace as a ``TraceSet``."""
    from aiprof.record.targets import resolve_all, stream_traces

    ray = getattr(args, "ray", None)
    if ray is None and sum(len(t.files) for t in resolve_all(targets)) < 2:
        return load_traces(args, targets, step_annotation=step_annotation)
    return stream_traces(targets, ray=ray, step_annotation=step_annotation)


def load_rank(args: argparse.Namespace, target: PathLike,
              rank: int | None) -> tuple[Trace, Target]:
    """``aiprof.record.targets.load_rank`` with a progress line."""
    from aiprof.record.targets import load_rank as load

    with busy(args, "reading the trace"):
        return load(target, rank)


def add_rank_argument(parser: argparse.ArgumentParser) -> None:
    """``--rank N`` for commands that analyse one rank of a multi-rank target."""
    parser.add_argument("--rank", type=int, metavar="N",
                        help="the rank to analyse when the target holds several (default: the "
                             "lowest rank)")
