"""The link a trace's own all-reduces imply: α and β fitted to the measured calls.

A what-if that starts from a trace should start from what that trace measured, not from a
datasheet preset. Each sized all-reduce call of the trace is one point (bytes, kernel time) of
the ring model ``2(p−1)α + 2(p−1)/p·n·β`` at the trace's world size p (``fit.fit_alpha_beta``).
Kernel time includes waiting for the slowest rank, so the fitted link is a lower bound on the
real link's speed: predictions from it are pessimistic where ranks were skewed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from aiprof.distributed.fit import fit_alpha_beta, ring_coefficients
from aiprof.distributed.links import LinkParams
from aiprof.errors import InputError

if TYPE_CHECKING:
    from aiprof.trace import Trace


@dataclass(frozen=True, kw_only=True)
class TraceLink:
    """The all-reduces a trace measured, and the link they imply."""

    num_ranks: int
    """World size the calls ran at."""
    num_calls: int
    allreduce_us_per_step: float
    """Measured all-reduce kernel time per step."""
    link: LinkParams
    how: str
    """How the link was obtained, in words."""


def trace_link(trace: Trace) -> TraceLink | None:
    """The measured link of ``trace``; None without sized all-reduces at two or more ranks."""
    from aiprof.distributed.commtrace import collective_calls

    info = trace.distributed
    ranks = int(info.world_size) if info is not None and info.world_size else 0
    calls = collective_calls(trace)
    rows = np.array([i for i, kind in enumerate(calls.kind) if kind == "allreduce"], dtype=int)
    if ranks < 2 or rows.size == 0:
        return None
    sizes, times = calls.num_bytes[rows].astype(float), calls.dur_us[rows].astype(float)
    sized = (sizes > 0) & (times > 0)
    if not sized.any():
        return None
    per_step = float(times.sum()) / max(len(trace.steps), 1)
    try:
        fit = fit_alpha_beta("allreduce", ranks, sizes[sized], times[sized])
        link = LinkParams(name="measured in the trace", alpha_us=max(fit.alpha_us, 0.0),
                          bandwidth_gbps=fit.bandwidth_gbps)
        how = (f"fitted to the trace's {int(sized.sum())} sized all-reduce calls at {ranks} "
               f"ranks (α {link.alpha_us:.2f} µs, {link.bandwidth_gbps:.2f} GB/s per link; "
               "kernel times include waiting for other ranks, so this is pessimistic)")
    except InputError:  # one message size: bandwidth only, latency taken as 0
        _, factor = ring_coefficients("allreduce", ranks)
        gbps = float(factor * sizes[sized].sum() / times[sized].sum() / 1000.0)
        link = LinkParams(name="measured in the trace", alpha_us=0.0, bandwidth_gbps=gbps)
        how = (f"the bandwidth of the trace's {int(sized.sum())} all-reduce calls of one size at "
               f"{ranks} ranks ({gbps:.2f} GB/s per link; latency not measurable, taken as 0)")
    return TraceLink(num_ranks=ranks, num_calls=int(rows.size), allreduce_us_per_step=per_step,
                     link=link, how=how)
