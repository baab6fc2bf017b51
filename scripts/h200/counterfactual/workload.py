"""A workload of the suite: a builder of steps from knobs, its planted base, and which fixes
can change it (and why the others cannot)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from counterfactual.data import LOADER_WARMUP
from counterfactual.knobs import FIX_BY_NAME, Ctx, Fix, Knobs, Step, turned

GENERIC = frozenset({"cuda_graph", "compile", "tf32", "bf16_autocast"})
"""Fixes any workload can take: every step can be graphed, compiled or run in TF32/bf16."""

WHY_NOT = {
    "channels_last": "no 2-D convolution in the model",
    "sdpa": "no attention in the model",
    "padded_shapes": "no misaligned dimension in the model",
    "loader_workers": "no DataLoader in the step",
    "host_prep_workers": "no host preprocessing in the loop",
    "pinned_prefetch": "no host-to-device copy in the step",
    "sync_free": "no synchronization in the step",
    "no_empty_cache": "no empty_cache in the step",
}
"""Why a fix has nothing to change in a workload that lacks what it acts on: such a fix is
recorded as not applicable with a gain of 0 (the fixed step is the planted step)."""


@dataclass(frozen=True)
class Workload:
    """One workload: ``build(ctx)`` returns its step for ``ctx.knobs``."""

    name: str
    kind: str
    """"transformers", "torchvision" or "custom"."""
    mode: str
    """"train" or "infer"."""
    description: str
    causes: tuple[str, ...]
    """Fix names of the planted causes."""
    base: Knobs
    build: Callable[[Ctx], Step]
    honors: frozenset[str] = field(default_factory=frozenset)
    """Fixes beyond the generic ones this workload's builder applies."""
    not_capturable: str = ""
    """Why the whole step cannot be one CUDA graph (empty when it can)."""
    capturable_after: str = ""
    """The fix after which the step can be one CUDA graph (the sync or ``empty_cache`` a graph
    cannot hold removed); empty where none can make it capturable. The ``cuda_graph`` fix is
    then measured on that fix's variant, in points of the planted step: what graphs add once
    it is applied, which is what a ``cpu_bound`` finding claims beside such a cause."""
    alternates: bool = False
    """Steps alternate (a loader's starved and fed steps): time block means, not medians."""
    compile_ok: bool = True
    """torch.compile is worth its 20-60 s here."""

    def __post_init__(self) -> None:
        for name in self.causes:
            assert name in FIX_BY_NAME, name
            assert self.applicability(FIX_BY_NAME[name]) == "", (self.name, name)
        assert not (self.not_capturable and "cuda_graph" in self.causes), self.name
        if self.capturable_after:
            assert self.not_capturable, self.name
            assert self.applicability(FIX_BY_NAME[self.capturable_after]) == "", self.name

    def graph_knobs(self) -> Knobs:
        """The knobs of the ``cuda_graph`` variant: the base graphed, or, where the base is not
        capturable, the ``capturable_after`` fix's variant graphed."""
        knobs = self.base
        if self.capturable_after:
            knobs = turned(knobs, FIX_BY_NAME[self.capturable_after])
        return turned(knobs, FIX_BY_NAME["cuda_graph"])

    def warmup(self, knobs: Knobs) -> int:
        """Steps before each timed block and before a trace: enough to drain what worker
        processes prefetched while other variants ran (else a starving loader looks fed)."""
        return LOADER_WARMUP if knobs.loader_workers or knobs.host_prep_workers else 2

    def applicability(self, fix: Fix) -> str:
        """Empty when the fix changes this workload; else why it does not."""
        if fix.name not in GENERIC and fix.name not in self.honors:
            return WHY_NOT[fix.name]
        if turned(self.base, fix) == self.base:
            return f"already {fix.knob}={fix.value!r} in the base"
        return ""
