"""What runs, in which order: the variants and their interleaved rounds."""

from __future__ import annotations

from dataclasses import dataclass

from aiprof.errors import InputError

BASE = "base"
AA = "aa"
"""The A/A variant (``--aa``): the unfixed script again, so its "gain" is process noise."""
SPAWN_MODES = ("fork", "exec")
STATISTICS = ("median", "floor")


@dataclass(frozen=True)
class VariantSpec:
    """One variant: the script with a fix applied, or unfixed (the base), or a hand-edited
    copy of it (``--edited LABEL=SCRIPT``: same arguments, no fix)."""

    label: str
    fix: str
    """Fix name for the variant process; "none" for the base and edited copies."""
    command: tuple[str, ...]
    """``script.py args`` (or ``-m module args``), without the interpreter."""
    edited: bool = False


@dataclass(frozen=True, kw_only=True)
class Protocol:
    """How each variant is measured."""

    rounds: int = 5
    steps: int = 20
    """Timed steps per process."""
    warmup_steps: int = 5
    """Steps run before timing starts (compilation, autotuning, first allocations)."""
    warmup_s: float = 0.0
    """On CUDA the warm-up also lasts at least this long (the GPU's clocks rise from idle)."""
    min_timed_s: float = 0.0
    """The timed steps last at least this long (more steps than ``steps`` where they are short)."""
    statistic: str = "median"
    """A process's step time: "median" of its timed steps, or "floor" (``stats.floor_step_us``:
    the fastest 50 ms block, for a host whose speed varies)."""
    spawn: str = "fork"
    """"fork": variants forked from a server that imported torch once (one rank only);
    "exec": each variant a new interpreter."""
    nproc: int = 1
    timeout_s: float = 600.0
    """Per variant process."""
    steps_from: str | None = None
    watch: str = "loss"

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise InputError(f"--rounds must be >= 1, got {self.rounds}")
        if self.steps < 2:
            raise InputError(f"--steps must be >= 2 timed steps, got {self.steps}")
        if self.warmup_steps < 3:
            raise InputError(f"--warmup must be >= 3 steps (the loss of steps 1-3 is read "
                             f"there), got {self.warmup_steps}")
        if not self.warmup_s >= 0:
            raise InputError(f"--warmup-s must be >= 0 seconds, got {self.warmup_s:g}")
        if not self.min_timed_s >= 0:
            raise InputError(f"--min-timed-s must be >= 0 seconds, got {self.min_timed_s:g}")
        if self.statistic not in STATISTICS:
            raise InputError(f"--statistic must be one of {', '.join(STATISTICS)}, got "
                             f"{self.statistic!r}")
        if self.spawn not in SPAWN_MODES:
            raise InputError(f"--spawn must be one of {', '.join(SPAWN_MODES)}, got "
                             f"{self.spawn!r}")
        if self.nproc < 1:
            raise InputError(f"--nproc must be >= 1, got {self.nproc}")
        if not self.timeout_s > 0:
            raise InputError(f"--timeout must be a positive number of seconds, got "
                             f"{self.timeout_s:g}")


def schedule(labels: list[str], rounds: int) -> list[tuple[int, str]]:
    """``(round, label)`` in run order. Even rounds run the base first, odd rounds last (so a
    machine that warms up or slows down along the trial biases the paired ratios one way in
    one round and the other way in the next); the other variants' order is rotated by one
    each round (no fix always sits next to the base)."""
    others = [label for label in labels if label != BASE]
    order: list[tuple[int, str]] = []
    for round_index in range(rounds):
        shift = round_index % len(others) if others else 0
        rotated = others[shift:] + others[:shift]
        labels_in_round = [BASE, *rotated] if round_index % 2 == 0 else [*rotated, BASE]
        order.extend((round_index, label) for label in labels_in_round)
    return order


def parse_edited(items: list[str]) -> list[tuple[str, str]]:
    """``["tf32=train_tf32.py"]`` -> ``[("tf32", "train_tf32.py")]``."""
    pairs = []
    for item in items:
        label, sep, path = item.partition("=")
        if not sep or not label or not path:
            raise InputError(f"--edited needs LABEL=SCRIPT, got {item!r}")
        pairs.append((label, path))
    return pairs
