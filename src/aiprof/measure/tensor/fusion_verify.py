"""``--verify``: measure what torch.compile's fusion actually gains on this device."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiprof.errors import InputError
from aiprof.factory import one_line
from aiprof.measure.timing import median_us


@dataclass(frozen=True)
class FusionVerification:
    """Eager vs torch.compile time of one forward pass, measured here."""

    device: str
    backend: str
    eager_us: float
    compiled_us: float
    speedup: float
    """eager / compiled."""
    saved_pct: float
    """(eager - compiled) / eager × 100."""
    num_repeats: int


def verify_fusion(
    model: Any,
    example_inputs: Sequence[Any],
    *,
    backend: str = "inductor",
    repeats: int = 10,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> FusionVerification:
    """Time ``model(*inputs)`` eagerly and compiled (inference mode, after warm-up)."""
    import torch

    device = _device_of(example_inputs)
    try:
        compiled = torch.compile(model, backend=backend)
        with torch.no_grad():
            eager_us = median_us(
                lambda: model(*example_inputs), device=device, repeats=repeats, clock=clock
            )
            compiled_us = median_us(
                lambda: compiled(*example_inputs),
                device=device,
                warmup=3,
                repeats=repeats,
                clock=clock,
            )
    except Exception as error:  # compile failures come from the user's model or toolchain
        raise InputError(f"torch.compile failed: {one_line(error)}") from error
    return FusionVerification(
        device=device,
        backend=backend,
        eager_us=eager_us,
        compiled_us=compiled_us,
        speedup=eager_us / compiled_us if compiled_us else float("inf"),
        saved_pct=100.0 * (eager_us - compiled_us) / eager_us if eager_us else 0.0,
        num_repeats=repeats,
    )


def _device_of(inputs: Sequence[Any]) -> str:
    for value in inputs:
        device = getattr(value, "device", None)
        if device is not None:
            return str(device)
    return "cpu"
