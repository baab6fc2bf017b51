"""One variant of ``aiprof try``: the user's script in this (fresh) process, one fix applied.

    python -m aiprof.measure.fixes.variant --fix NAME --warmup W --steps N --result DIR \
        [--warmup-s S] [--min-timed-s T] [--steps-from NAME] [--watch NAME] -- script.py args

Runs the script as ``aiprof run`` does (``capture.runner``: same ``sys.argv``, ``__main__``,
same step detection: the optimizer hook, ``aiprof.step()`` or ``--steps-from``) without the
profiler, times each step with CUDA events at the step boundaries (host clock without CUDA;
``capture.step_timer``), stops the script after ``W + N`` steps (on CUDA the warm-up also
lasts at least ``S`` seconds, and the timed steps at least ``T`` seconds, so either can be
more steps; one rank only: ranks of a torchrun job stop at the same step, so they count steps)
and writes ``DIR/rank<R>.json``. Exit status: 0 when the script ran its steps, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

from aiprof.capture.api import activate, deactivate
from aiprof.capture.runner import StopScript, execute, parse_target, script_context
from aiprof.capture.step_timer import StepTimer
from aiprof.capture.steps import (
    StepPolicy,
    install_function_hook,
    install_optimizer_hook,
    install_record_function_hook,
)
from aiprof.measure.fixes import FIX_CLASSES, Fix
from aiprof.measure.fixes.watch import LossWatch

PROBE_ITERATIONS = 200_000
"""About 10 ms of one core (2-core CPU VM, CPython 3.11): long against the clock's resolution,
short against a process's life."""


class VariantSession:
    """Counts steps (one policy for all sources), marks their boundaries, applies the fix's
    per-step hooks and stops the script when its steps are done."""

    def __init__(self, torch: Any, fix: Fix, watch: LossWatch, *, warmup: int, steps: int,
                 steps_from: str | None, warmup_s: float = 0.0, min_timed_s: float = 0.0,
                 world_size: int = 1) -> None:
        self.torch, self.fix, self.watch = torch, fix, watch
        self.policy = StepPolicy(steps_from)
        self.timer = StepTimer(torch, discarded=warmup)
        self.host_marks_ns: list[int] = []
        self.num_steps = 0
        self.steps = steps
        self.warmup = warmup
        # Seconds are read on each rank's own clock: two ranks could stop at different steps
        # and leave one waiting in a collective, so a torchrun job counts steps only.
        alone = world_size == 1
        self.warmup_s = warmup_s if self.timer.clock == "cuda_events" and alone else 0.0
        self.min_timed_s = min_timed_s if alone else 0.0
        self.total = warmup + steps if self.warmup_s <= 0 else 0
        """0 while the warm-up is still running (the timed steps start once it is over)."""
        self.timed_from = warmup if self.warmup_s <= 0 else 0
        """The step after which timing starts (0 while the warm-up runs)."""

    def _warm_up_over(self) -> bool:
        """The warm-up lasts ``warmup`` steps and, on CUDA, at least ``warmup_s`` seconds from
        the end of the first step. An idle H200 reads 345 MHz of its 1,980 MHz (nvidia-smi,
        2026-12-01); measured there, a 4096² FP32 matmul after 6 s idle is at its steady time
        0.14 s after the first call (tests/data/trial/h200_try_aa.json), so the default 0.5 s
        covers the clocks and lazy library set-up with room to spare."""
        if self.num_steps < self.warmup:
            return False
        elapsed_s = (self.host_marks_ns[-1] - self.host_marks_ns[0]) / 1e9
        return elapsed_s >= self.warmup_s

    def step(self, source: str = "user", optimizer: object | None = None) -> None:
        if not self.policy.accept(source, optimizer):
            return
        self.num_steps += 1
        self.timer.mark()
        self.host_marks_ns.append(time.perf_counter_ns())
        self.watch.at_step(self.num_steps)
        self.fix.at_step(self.torch, self.num_steps, optimizer)
        if not self.total and self._warm_up_over():
            self.timer.discard_through(self.num_steps)
            self.total = self.num_steps + self.steps
            self.timed_from = self.num_steps
        if self.total and self.num_steps >= self.total and self._timed_long_enough():
            raise StopScript()

    def _timed_long_enough(self) -> bool:
        """The timed steps have lasted ``min_timed_s`` (host clock): a window of 20 steps of
        5 ms is 0.1 s, short enough for one stall of the host to move its median."""
        if self.min_timed_s <= 0:
            return True
        began = self.host_marks_ns[self.timed_from - 1]
        return (self.host_marks_ns[-1] - began) / 1e9 >= self.min_timed_s

    @property
    def warmup_steps_run(self) -> int:
        """Steps run before the timed ones (``warmup`` or more, see ``_warm_up_over``)."""
        return self.timed_from if self.total else self.num_steps


def _hooks(session: VariantSession, steps_from: str | None) -> list[Any]:
    if steps_from:
        return [install_record_function_hook(lambda name: name == steps_from,
                                             lambda: session.step("named")),
                install_function_hook(steps_from, lambda: session.step("named"))]
    return [install_optimizer_hook(lambda opt: session.step("optimizer", opt))]


def _peak_memory(torch: Any) -> dict[str, int | None]:
    gpu = reserved = None
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        gpu = int(torch.cuda.max_memory_allocated())
        reserved = int(torch.cuda.max_memory_reserved())
    host = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB (getrusage(2))
    return {"peak_gpu_allocated_bytes": gpu, "peak_gpu_reserved_bytes": reserved,
            "peak_host_rss_bytes": int(host)}


def host_probe_us() -> float:
    """The time of one fixed piece of pure-Python work (µs): the host's speed as this process
    sees it, before the script and after its last step, so that a process which ran slower
    than the next can be told apart from a slower variant."""
    began = time.perf_counter_ns()
    total = 0
    for i in range(PROBE_ITERATIONS):
        total += i * i
    del total
    return (time.perf_counter_ns() - began) / 1000.0


def _phases_s(began_ns: int, marks_ns: list[int], warmup_steps: int,
              ended_ns: int) -> dict[str, float]:
    """Where the variant's time went (host clock, s): imports, model build and the first step;
    the warm-up; the timed steps; and what came after the last step (stop, fix, results)."""
    if not marks_ns:
        return {"to_first_step": round((ended_ns - began_ns) / 1e9, 3)}
    warm = marks_ns[min(max(warmup_steps, 1), len(marks_ns)) - 1]
    return {"to_first_step": round((marks_ns[0] - began_ns) / 1e9, 3),
            "warmup": round((warm - marks_ns[0]) / 1e9, 3),
            "timed": round((marks_ns[-1] - warm) / 1e9, 3),
            "after_last_step": round((ended_ns - marks_ns[-1]) / 1e9, 3)}


def run_variant(args: argparse.Namespace) -> dict[str, Any]:
    """Apply the fix, run the script to its last step, and return the result document."""
    began_ns = time.perf_counter_ns()
    fix = FIX_CLASSES[args.fix]()
    fix.environment(os.environ)
    import torch

    target = parse_target(args.command)
    package = str(Path(__file__).resolve().parents[2])  # src/aiprof: no frames of ours
    skip = (package, os.path.dirname(torch.__file__))
    watch = LossWatch(args.watch, skip)
    session = VariantSession(torch, fix, watch, warmup=args.warmup, steps=args.steps,
                             steps_from=args.steps_from, warmup_s=args.warmup_s,
                             min_timed_s=args.min_timed_s,
                             world_size=int(os.environ.get("WORLD_SIZE", "1")))
    probe_us = [host_probe_us()]
    fix.before_script(torch)
    uninstall = _hooks(session, args.steps_from)
    watch.install()
    activate(session)
    try:
        with script_context(target):
            outcome = execute(target)
    finally:
        deactivate(session)
        watch.uninstall()
        for remove in reversed(uninstall):
            remove()
    done = bool(session.total) and session.num_steps >= session.total
    step_us = session.timer.step_times_us() if done else []
    probe_us.append(host_probe_us())
    fix.finish(torch)
    marks = session.host_marks_ns
    phases = _phases_s(began_ns, marks, session.warmup_steps_run, time.perf_counter_ns())
    return {
        "fix": args.fix, "rank": int(os.environ.get("RANK", "0")),
        "ended": outcome.ended, "exit_code": outcome.exit_code, "error": outcome.error,
        "num_steps": session.num_steps,
        "needed_steps": session.total or session.warmup_steps_run + session.steps,
        "warmup_steps": session.warmup_steps_run,
        "step_source": session.policy.source, "clock": session.timer.clock,
        "step_us": [round(t, 3) for t in step_us],
        "host_step_us": [round((b - a) / 1000.0, 3) for a, b in
                         zip(marks, marks[1:], strict=False)],
        "watch": {"source": watch.source, "values": watch.values},
        "phases_s": phases, "host_probe_us": [round(t, 1) for t in probe_us],
        "not_applicable": fix.not_applicable, "facts": fix.facts, "notes": fix.notes,
        **_peak_memory(torch),
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="aiprof-try-variant")
    parser.add_argument("--fix", required=True, choices=sorted(FIX_CLASSES))
    parser.add_argument("--warmup", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--result", type=Path, required=True)
    parser.add_argument("--warmup-s", type=float, default=0.0)
    parser.add_argument("--min-timed-s", type=float, default=0.0)
    parser.add_argument("--steps-from")
    parser.add_argument("--watch", default="loss")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    document = run_variant(args)
    rank = document["rank"]
    args.result.mkdir(parents=True, exist_ok=True)
    path = args.result / f"rank{rank}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(document), encoding="utf-8")
    tmp.replace(path)
    sys.stdout.flush()
    sys.stderr.flush()
    done = document["num_steps"] >= document["needed_steps"]
    return 0 if done else (document["exit_code"] or 1)


if __name__ == "__main__":
    # os._exit: DataLoader workers, compile workers and process groups the stopped script left
    # running must not hold the variant open; the result file is already written.
    os._exit(main())
