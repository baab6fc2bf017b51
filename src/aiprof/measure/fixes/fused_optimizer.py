"""``fused_optimizer``: Adam, AdamW and SGD update all parameters in one fused kernel.

How: the ``__init__`` of ``torch.optim.Adam``, ``AdamW`` and ``SGD`` is wrapped before the
script runs; an optimizer built without ``fused`` gets ``fused=True`` (and ``foreach`` left
to torch, since the two exclude each other). If torch refuses (parameters on a device or of
a dtype the fused kernels do not support, ``differentiable=True``), the optimizer is built
exactly as the script asked and the refusal is reported.
Does not apply: no such optimizer was built, the script chose ``fused`` itself, or torch
refused for every one. PyTorch 2.4+ also has fused CPU kernels for the three.
"""

from __future__ import annotations

from typing import Any

from aiprof.measure.fixes.base import Fix

OPTIMIZERS = ("Adam", "AdamW", "SGD")


class FusedOptimizer(Fix):
    name = "fused_optimizer"

    def before_script(self, torch: Any) -> None:
        self.facts.update(fused=0, refused=0, left=0)
        for name in OPTIMIZERS:
            self._wrap(getattr(torch.optim, name))

    def _wrap(self, cls: Any) -> None:
        original = cls.__init__

        def init(optimizer: Any, params: Any, *args: Any, **kwargs: Any) -> None:
            if type(optimizer) is not cls or kwargs.get("fused") is not None \
                    or kwargs.get("differentiable"):
                self.facts["left"] += 1
                original(optimizer, params, *args, **kwargs)
                return
            params = list(params)  # a generator would be used up by a refused attempt
            try:
                original(optimizer, params, *args, **{**kwargs, "fused": True, "foreach": None})
            except (RuntimeError, ValueError) as error:
                self.facts["refused"] += 1
                self.notes.append(f"{cls.__name__}(fused=True) refused: {error}")
                original(optimizer, params, *args, **kwargs)
                return
            self.facts["fused"] += 1

        cls.__init__ = init

    def finish(self, torch: Any) -> None:
        if not self.facts.get("fused"):
            self.not_applicable = ("torch refused fused=True" if self.facts.get("refused")
                                   else "no Adam/AdamW/SGD was built without fused=")
