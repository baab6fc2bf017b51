"""The numerics guard's reading: the loss of the first steps, without editing the script.

Two sources, in this order: the value the optimizer's closure returned (``opt.step(closure)``,
seen by wrapping the closure in a global optimizer pre-hook,
``torch.optim.optimizer.register_optimizer_step_pre_hook``), else a scalar variable of the
script named ``--watch NAME`` (default ``loss``), read from the innermost frame on the stack
that has it, at the step boundary. Reading a GPU scalar synchronizes, so only the first
``WATCH_STEPS`` steps are read; they are warm-up steps, never timed.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

WATCH_STEPS = 3
"""Steps whose loss is read (all inside the warm-up, which is at least this long)."""


def scalar(value: Any) -> float | None:
    """``value`` as a float when it is a one-element tensor or a real number."""
    if hasattr(value, "numel") and hasattr(value, "detach"):
        if value.numel() != 1:
            return None
        number = float(value.detach().float().item())
    elif isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    else:
        return None
    return number if math.isfinite(number) else None


def frame_value(name: str, skip_files: tuple[str, ...]) -> Any:
    """The innermost variable ``name`` on the stack, outside frames of ``skip_files``."""
    frame = sys._getframe(1)
    while frame is not None:
        if not frame.f_code.co_filename.startswith(skip_files) and name in frame.f_locals:
            return frame.f_locals[name]
        frame = frame.f_back  # type: ignore[assignment]
    return None


class LossWatch:
    """Collects the watched loss of steps 1..``WATCH_STEPS``."""

    def __init__(self, name: str, skip_files: tuple[str, ...]) -> None:
        self.name = name
        self.source = ""
        self.values: list[float] = []
        self._skip = skip_files
        self._closure_value: float | None = None
        self._remove: Callable[[], None] | None = None

    def install(self) -> None:
        """Wrap optimizer closures so their returned loss is seen."""
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        def pre_hook(optimizer: Any, args: Any, kwargs: Any) -> Any:
            # torch passes the step's own args, the optimizer first: (self, closure, ...)
            closure = kwargs.get("closure", args[1] if len(args) > 1 else None)
            if closure is None or len(self.values) >= WATCH_STEPS:
                return None

            def watched() -> Any:
                result = closure()
                self._closure_value = scalar(result)
                return result

            if "closure" in kwargs:
                return args, {**kwargs, "closure": watched}
            return (args[0], watched, *args[2:]), kwargs

        self._remove = register_optimizer_step_pre_hook(pre_hook).remove

    def uninstall(self) -> None:
        if self._remove is not None:
            self._remove()
            self._remove = None

    def at_step(self, step: int) -> None:
        """Read the loss of step ``step`` (only the first ``WATCH_STEPS``)."""
        if step > WATCH_STEPS:
            return
        value, source = self._closure_value, "closure"
        if value is None:
            value, source = scalar(frame_value(self.name, self._skip)), f"variable {self.name}"
        self._closure_value = None
        if value is not None:
            self.values.append(value)
            self.source = self.source or source
