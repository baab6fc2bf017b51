"""Time the training loop spends waiting for input data, per step.

Input-pipeline spans are the ``enumerate(DataLoader)#_...Iter.__next__`` (and DataPipe)
ranges that torch.utils.data records (``classify.DATALOADER``), whether they appear as
annotations or as CPU ops. With ``num_workers > 0`` the main process only dequeues a batch
that worker processes prepared, so the span is short; without workers it contains the whole
loading and transforming of the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.breakdown import step_window
from aiprof.analysis.classify import DATALOADER, spans
from aiprof.trace import Trace


@dataclass(frozen=True)
class DataloaderResult:
    """Input-pipeline time inside the steps."""

    per_step_us: list[float]
    spans: iv.Intervals
    """The dataloader spans (normalized) clipped to the steps."""
    num_spans: int

    @property
    def mean_us(self) -> float:
        return float(np.mean(self.per_step_us)) if self.per_step_us else 0.0


def dataloader_time(trace: Trace) -> DataloaderResult:
    """Union of dataloader spans inside each step."""
    ann, ops = trace.annotations, trace.cpu_ops
    covered = iv.union_all(
        spans(ann, trace.strings.mask(ann.name_id, DATALOADER)),
        spans(ops, trace.strings.mask(ops.name_id, DATALOADER)),
    )
    inside = iv.intersect(covered, step_window(trace))
    steps = trace.steps
    per_step = [
        iv.length(iv.intersect(inside, (np.array([s]), np.array([e]))))
        for s, e in zip(steps.start_us, steps.end_us, strict=True)
    ]
    return DataloaderResult(per_step, inside, len(inside[0]))
