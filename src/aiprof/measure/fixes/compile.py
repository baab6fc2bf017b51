"""``compile``: ``torch.compile`` of the model, found through the first optimizer.

How: at the end of the first step, the model is the ``torch.nn.Module`` (looked up among
the live objects, ``gc.get_objects()``) that owns the first parameter of the optimizer that
stepped, the largest such module (so the whole model, not one layer); without an optimizer,
the live module with the most parameters. It is compiled in place with ``module.compile()``
(``nn.Module.compile``, PyTorch 2.2+): the script's own reference now runs the compiled
forward. Compilation happens in the next step, a warm-up step; its time (the warm-up steps'
excess over the measured median, host clock) is reported separately, never in the gain.
Does not apply: no module with parameters was found. Recompilations after the warm-up
(shapes that change) land in the measured steps and show as a loss.
"""

from __future__ import annotations

import gc
import warnings
from typing import Any

from aiprof.measure.fixes.base import Fix


def owning_module(torch: Any, optimizer: object | None) -> Any:
    """The largest live module holding the optimizer's first parameter (or, without one,
    the live module with the most parameters); None when there is none."""
    first = None
    if optimizer is not None:
        groups = getattr(optimizer, "param_groups", [])
        first = next((p for group in groups for p in group["params"]), None)
    best, best_count = None, 0
    with warnings.catch_warnings():  # isinstance() on deprecated module objects warns
        warnings.simplefilter("ignore")
        modules = [obj for obj in gc.get_objects() if isinstance(obj, torch.nn.Module)]
    for obj in modules:
        params = list(obj.parameters())
        if first is not None and not any(p is first for p in params):
            continue
        if len(params) > best_count:
            best, best_count = obj, len(params)
    return best


class Compile(Fix):
    name = "compile"

    def at_step(self, torch: Any, step: int, optimizer: object | None) -> None:
        if step != 1:
            return
        module = owning_module(torch, optimizer)
        if module is None:
            return
        module.compile()
        self.facts["compiled_module"] = type(module).__name__
        self.facts["found_through"] = "optimizer" if optimizer is not None else "largest module"

    def finish(self, torch: Any) -> None:
        if "compiled_module" not in self.facts:
            self.not_applicable = "no model (a module with parameters) was found after step 1"
