"""Run the schedule: one fresh process per (round, variant), in order, whatever fails.

The process launcher and the clock are parameters, so the order, the skipping and the
budget are tested with a fake launcher and a fake clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from aiprof.trial.plan import BASE, VariantSpec, schedule
from aiprof.trial.runs import FAILED, INTERRUPTED, NOT_APPLICABLE, OK, TIMEOUT, VariantRun

Launch = Callable[[VariantSpec, int], VariantRun]
Progress = Callable[[VariantRun], None]


@dataclass
class TrialRuns:
    """Every process that ran, in run order, and why the schedule stopped early (if it did)."""

    runs: list[VariantRun] = field(default_factory=list)
    interrupted: bool = False
    stopped: str = ""
    """Why rounds were left out: the base failed, or the time budget ran out."""
    wall_s: float = 0.0


def run_trial(variants: list[VariantSpec], rounds: int, launch: Launch, *,
              clock: Callable[[], float] = time.monotonic, budget_s: float | None = None,
              progress: Progress | None = None) -> TrialRuns:
    """Run ``rounds`` interleaved rounds of ``variants`` (the base among them).

    A variant that did not apply, failed or timed out is not run again (its first round
    says why); the others go on. When the base fails there is nothing to compare with and
    the trial stops. With ``budget_s``, no round starts that would end after it (judged by
    the longest round so far). Ctrl-C ends the trial and keeps what was measured.
    """
    by_label = {spec.label: spec for spec in variants}
    done = TrialRuns()
    start = clock()
    dropped: set[str] = set()
    round_start, longest_round, current_round = start, 0.0, -1
    try:
        for round_index, label in schedule(list(by_label), rounds):
            if round_index != current_round:
                now = clock()
                if current_round >= 0:
                    longest_round = max(longest_round, now - round_start)
                if budget_s is not None and current_round >= 0 \
                        and now - start + longest_round > budget_s:
                    done.stopped = (f"time budget: {round_index} of {rounds} rounds fit in "
                                    f"{budget_s:g} s")
                    break
                round_start, current_round = now, round_index
            if label in dropped:
                continue
            run = launch(by_label[label], round_index)
            done.runs.append(run)
            if progress is not None:
                progress(run)
            if run.status in (NOT_APPLICABLE, FAILED, TIMEOUT):
                dropped.add(label)
                if label == BASE:
                    done.stopped = f"the base run {run.status}: {run.reason}"
                    break
    except KeyboardInterrupt:
        done.interrupted = True
        done.stopped = "interrupted (Ctrl-C)"
    done.wall_s = clock() - start
    return done


def paired_rounds(runs: list[VariantRun], label: str) -> list[tuple[VariantRun, VariantRun]]:
    """(base, variant) pairs of the rounds in which both measured."""
    base = {r.round: r for r in runs if r.label == BASE and r.status == OK}
    return [(base[r.round], r) for r in runs
            if r.label == label and r.status == OK and r.round in base]


def first_problem(runs: list[VariantRun], label: str) -> VariantRun | None:
    """The variant's run that was not a measurement (not applicable, failed...), if any."""
    return next((r for r in runs if r.label == label and r.status != OK), None)


__all__ = ["INTERRUPTED", "TrialRuns", "first_problem", "paired_rounds", "run_trial"]
