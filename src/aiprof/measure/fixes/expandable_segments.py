"""``expandable_segments``: the CUDA caching allocator maps growing segments instead of
fixed-size blocks, which cuts fragmentation and ``cudaMalloc`` calls when sizes vary.

How: ``expandable_segments:True`` is added to ``PYTORCH_CUDA_ALLOC_CONF`` in the variant
process's environment before torch is imported (the allocator reads it once, at its first
allocation; PyTorch docs, "CUDA semantics: optimizing memory usage with
PYTORCH_CUDA_ALLOC_CONF").
Does not apply: no CUDA device, or the variable already sets ``expandable_segments``.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from aiprof.measure.fixes.base import Fix, cuda_available

ALLOC_CONF = "PYTORCH_CUDA_ALLOC_CONF"


class ExpandableSegments(Fix):
    name = "expandable_segments"

    def environment(self, environ: MutableMapping[str, str]) -> None:
        current = environ.get(ALLOC_CONF, "")
        if "expandable_segments" in current:
            self.not_applicable = f"{ALLOC_CONF} already sets expandable_segments ({current})"
            return
        environ[ALLOC_CONF] = ",".join(part for part in (current, "expandable_segments:True")
                                       if part)
        self.facts[ALLOC_CONF] = environ[ALLOC_CONF]

    def finish(self, torch: Any) -> None:
        if not self.not_applicable and not cuda_available(torch):
            self.not_applicable = "no CUDA device: the CUDA allocator is not used"
