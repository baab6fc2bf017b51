"""``no_empty_cache``: ``torch.cuda.empty_cache()`` does nothing.

How: ``torch.cuda.empty_cache`` and ``torch.cuda.memory.empty_cache`` are replaced, before
the script runs, by a function that only counts its calls; the caching allocator keeps its
blocks, so the next step's allocations do not go back to ``cudaMalloc``. A name bound
before the script ran (``from torch.cuda import empty_cache`` in a module imported
earlier) is not replaced.
Does not apply: the script never called it.
"""

from __future__ import annotations

from typing import Any

from aiprof.measure.fixes.base import Fix


class NoEmptyCache(Fix):
    name = "no_empty_cache"

    def before_script(self, torch: Any) -> None:
        self.facts["empty_cache_calls"] = 0

        def empty_cache() -> None:
            self.facts["empty_cache_calls"] += 1

        torch.cuda.empty_cache = empty_cache
        torch.cuda.memory.empty_cache = empty_cache

    def finish(self, torch: Any) -> None:
        if not self.facts.get("empty_cache_calls"):
            self.not_applicable = "the script never called torch.cuda.empty_cache()"
