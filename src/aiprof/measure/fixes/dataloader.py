"""``dataloader``: DataLoaders built with ``num_workers=0`` get worker processes.

How: ``torch.utils.data.DataLoader.__init__`` is wrapped before the script runs. A loader
the script builds with ``num_workers=0`` (the default) gets ``num_workers = W``,
``persistent_workers=True``, ``prefetch_factor=4`` and, with a CUDA device,
``pin_memory=True``. ``W`` is one worker per core this process may use, one core left for
the main process, at most 8, divided among the local ranks under torchrun.
Does not apply: no loader was built with ``num_workers=0``; an ``IterableDataset`` is left
alone (every worker would yield the whole dataset unless it splits its work with
``get_worker_info()``). Batch order is the sampler's, in the main process, so a seeded script
sees the same batches.
"""

from __future__ import annotations

import os
from typing import Any

from aiprof.forked import usable_cores
from aiprof.measure.fixes.base import Fix, cuda_available

MAX_WORKERS = 8
"""A cap: beyond a few workers per GPU, start-up time and memory grow and the main process
rarely waits less (PyTorch forum guidance, 4 per GPU as a start)."""
PREFETCH_FACTOR = 4
"""Batches each worker keeps ready (DataLoader's default is 2)."""


def worker_count(cores: int, local_ranks: int) -> int:
    """Workers for one loader: the cores left after the main processes, shared by ranks."""
    share = max(1, cores // max(1, local_ranks))
    return max(1, min(MAX_WORKERS, share - 1))


class DataLoaderWorkers(Fix):
    name = "dataloader"

    def before_script(self, torch: Any) -> None:
        loader_class = torch.utils.data.DataLoader
        original = loader_class.__init__
        workers = worker_count(usable_cores(), int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
        pin = cuda_available(torch)
        self.facts.update(loaders_changed=0, loaders_left=0, num_workers=workers)

        def init(loader: Any, dataset: Any, *args: Any, **kwargs: Any) -> None:
            positional_workers = len(args) >= 5  # (batch_size, shuffle, sampler, batch_sampler,
            given = args[4] if positional_workers else kwargs.get("num_workers", 0)  # workers)
            iterable = isinstance(dataset, torch.utils.data.IterableDataset)
            if given or positional_workers or iterable:
                self.facts["loaders_left"] += 1
                original(loader, dataset, *args, **kwargs)
                return
            kwargs.update(num_workers=workers, persistent_workers=True,
                          prefetch_factor=PREFETCH_FACTOR)
            if pin:
                kwargs["pin_memory"] = True
            self.facts["loaders_changed"] += 1
            original(loader, dataset, *args, **kwargs)

        loader_class.__init__ = init

    def finish(self, torch: Any) -> None:
        if not self.facts.get("loaders_changed"):
            self.not_applicable = ("no DataLoader was built with num_workers=0 over a "
                                   "map-style dataset")
