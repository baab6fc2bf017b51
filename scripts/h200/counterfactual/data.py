"""Input pipelines with their planted faults: a DataLoader without workers and with CPU
transforms, host preprocessing inside the loop, pageable host-to-device copies."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import numpy as np
import torch
import torch.nn.functional as F

from counterfactual.knobs import Ctx

WORKERS = min(8, os.cpu_count() or 1)
"""Workers of a fixed DataLoader: 8 on the 16-core H200 host (fewer where there are fewer)."""
PREFETCH = 2
"""torch's default prefetch_factor; a loader's buffer holds WORKERS * PREFETCH batches."""
START = "forkserver"
"""How workers start. Not fork: workers forked after profiler sessions had run in the same
process aborted with a CUDA initialization error (docs/diagnose.md, the diagnose suite's run
B); a fork server starts before any worker and never touches CUDA. Datasets and the functions
they call must therefore be picklable (module-level classes, no lambdas)."""


class AugmentedImages(torch.utils.data.Dataset[tuple[torch.Tensor, int]]):
    """Images decoded and augmented on the CPU per sample: blur and normalisation passes,
    a random crop and flip, as a torchvision transform pipeline does."""

    def __init__(self, size: int, passes: int, classes: int = 10) -> None:
        self.size, self.passes, self.classes = size, passes, classes

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(i)
        img = torch.rand(3, self.size + 16, self.size + 16, generator=g)
        top, left = (int(v) for v in torch.randint(0, 16, (2,), generator=g))
        img = img[:, top:top + self.size, left:left + self.size]
        if i % 2:
            img = img.flip(-1)
        for _ in range(self.passes):
            img = F.avg_pool2d(img[None], 3, stride=1, padding=1)[0]
            img = (img - img.mean()) / (img.std() + 1e-6)
        return img.contiguous(), i % self.classes


class TextSamples(torch.utils.data.Dataset[torch.Tensor]):
    """Token ids made on the host per sample by a Python-level "tokenizer" (hashing words)."""

    def __init__(self, seq: int, vocab: int, words_per_token: int = 1) -> None:
        self.seq, self.vocab, self.words = seq, vocab, words_per_token

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i: int) -> torch.Tensor:
        rng = np.random.default_rng(i)
        words = rng.integers(0, 1 << 30, size=self.seq * self.words)
        ids = [hash((int(w), i)) % self.vocab for w in words[:: self.words]]
        return torch.tensor(ids, dtype=torch.long)


def batches(ctx: Ctx, dataset: torch.utils.data.Dataset, batch: int,
            workers_knob: str = "loader_workers") -> Iterator:
    """An endless stream of batches; ``num_workers=0`` unless the knob asks for workers."""
    workers = WORKERS if getattr(ctx.knobs, workers_knob) else 0
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=batch, num_workers=workers, pin_memory=workers > 0 and ctx.cuda,
        persistent_workers=workers > 0, prefetch_factor=PREFETCH if workers else None,
        multiprocessing_context=START if workers else None, drop_last=True)
    while True:
        yield from loader


LOADER_WARMUP = WORKERS * PREFETCH + 2
"""Steps that drain a worker loader's prefetched batches, so the steady state is timed."""


def to_device(ctx: Ctx, x: torch.Tensor) -> torch.Tensor:
    return x.to(ctx.device, non_blocking=ctx.knobs.pinned or ctx.knobs.loader_workers
                or ctx.knobs.host_prep_workers)


class HostFeed:
    """A host tensor sent to the device every step.

    Planted: the tensor lives in pageable memory and is copied synchronously when it is needed.
    Fixed (``pinned``): it lives in pinned memory and the next step's copy is issued on a side
    stream one step ahead, so the copy overlaps the current step's kernels.
    Fixed and graphed (``pinned`` and ``cuda_graph``): a CUDA graph cannot hold a copy issued in
    one replay and waited for in the next, so each step forks the side stream, copies the next
    batch into a static device buffer there while the step computes on the current one, and
    joins the side stream when the step ends (``join``): the same overlap inside one replay.
    """

    def __init__(self, ctx: Ctx, host: torch.Tensor) -> None:
        self.ctx = ctx
        self.host = ctx.pin(host) if ctx.knobs.pinned else host
        self.stream = torch.cuda.Stream() if ctx.cuda and ctx.knobs.pinned else None
        self.ahead: torch.Tensor | None = None
        # graphed: the static buffers a step computes on and copies the next batch into (never
        # swapped: a replay's timing, not its data, is what the suite measures)
        self.buffers = ((torch.empty_like(self.host, device=ctx.device),
                         torch.empty_like(self.host, device=ctx.device))
                        if self.stream is not None and ctx.knobs.cuda_graph else None)

    def join(self) -> None:
        """The end of a graphed step: the main stream waits for the side stream's copy."""
        if self.buffers is not None and self.stream is not None:
            torch.cuda.current_stream().wait_stream(self.stream)

    def _issue(self) -> torch.Tensor:
        assert self.stream is not None
        with torch.cuda.stream(self.stream):
            return self.host.to(self.ctx.device, non_blocking=True)

    def next(self) -> torch.Tensor:
        if self.stream is None:
            return self.host.to(self.ctx.device)
        if self.buffers is not None:  # graphed: fork, copy the next batch, compute on this one
            current, ahead = self.buffers
            self.stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.stream):
                ahead.copy_(self.host, non_blocking=True)
            return current
        if self.ahead is None:
            self.ahead = self._issue()
        torch.cuda.current_stream().wait_stream(self.stream)
        current = self.ahead
        current.record_stream(torch.cuda.current_stream())
        self.ahead = self._issue()
        return current


class TokenBatch:
    """``batch`` samples of a TextSamples stacked into one batch of ids (picklable)."""

    def __init__(self, text: TextSamples, batch: int) -> None:
        self.text, self.batch = text, batch

    def __call__(self, i: int) -> torch.Tensor:
        return torch.stack([self.text[i * self.batch + j] for j in range(self.batch)])


class PreparedOnHost(torch.utils.data.Dataset[torch.Tensor]):
    """One batch made by a host function, served by DataLoader workers (the fix for host
    preprocessing inside the loop)."""

    def __init__(self, make: Callable[[int], torch.Tensor]) -> None:
        self.make = make

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.make(i)


def host_batches(ctx: Ctx, make: Callable[[int], torch.Tensor]) -> Iterator[torch.Tensor]:
    """Batches made by ``make(i)`` in the loop (planted) or by DataLoader workers (fixed)."""
    if not ctx.knobs.host_prep_workers:
        i = 0
        while True:
            yield make(i)
            i += 1
    loader = torch.utils.data.DataLoader(
        PreparedOnHost(make), batch_size=None, num_workers=WORKERS, pin_memory=ctx.cuda,
        persistent_workers=True, prefetch_factor=PREFETCH, multiprocessing_context=START)
    while True:
        yield from loader
