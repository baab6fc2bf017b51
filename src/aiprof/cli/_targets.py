"""The TRACE arguments every trace-reading command shares, with the same words and options."""

from __future__ import annotations

import argparse

TARGET_HELP = (
    "a trace file (.json/.json.gz), a directory of rank traces, a run record from "
    "'aiprof run' (runs/ means runs/latest), or example:NAME (see 'aiprof examples')"
)


def add_target_argument(parser: argparse.ArgumentParser, name: str = "target",
                        *, many: bool = False) -> None:
    """The positional TRACE argument (``many``: one or more)."""
    parser.add_argument(name, metavar="TRACE", nargs="+" if many else None, help=TARGET_HELP)


def add_rank_argument(parser: argparse.ArgumentParser) -> None:
    """``--rank N`` for commands that analyse one rank of a multi-rank target."""
    parser.add_argument("--rank", type=int, metavar="N",
                        help="the rank to analyse when the target holds several (default: the "
                             "lowest rank)")
