"""Inference performance (chapter 33.3): dynamic batcher, simulator, tuning, padding analysis.

These names import without torch; what runs a model (latency curves, stages, cold start, CUDA
graphs, INT8, the serving engine) is in ``aiprof.measure.inference``. Each name is imported when
first used (PEP 562), so the load-generator process (``aiprof.inference.loadclient``) starts
without the batcher, the simulator and the tuner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiprof.lazy import lazy_names

if TYPE_CHECKING:
    from aiprof.inference.batcher import DynamicBatcher
    from aiprof.inference.clock import FakeClock, LoopClock
    from aiprof.inference.failures import (
        BatchFailedError,
        ModelOutputError,
        QueueFullError,
        RequestRejectedError,
    )
    from aiprof.inference.latency_curve import LatencyCurve
    from aiprof.inference.metrics import BatchingMetrics
    from aiprof.inference.padding import PaddingOptions, PaddingReport, analyze_padding
    from aiprof.inference.policy import BatchPolicy, QueuePolicy
    from aiprof.inference.simulator import SimulationOptions, simulate
    from aiprof.inference.tune import TuneOptions, tune_policy

_WHERE = {
    "BatchFailedError": "aiprof.inference.failures",
    "BatchPolicy": "aiprof.inference.policy",
    "BatchingMetrics": "aiprof.inference.metrics",
    "DynamicBatcher": "aiprof.inference.batcher",
    "FakeClock": "aiprof.inference.clock",
    "LatencyCurve": "aiprof.inference.latency_curve",
    "LoopClock": "aiprof.inference.clock",
    "ModelOutputError": "aiprof.inference.failures",
    "PaddingOptions": "aiprof.inference.padding",
    "PaddingReport": "aiprof.inference.padding",
    "QueueFullError": "aiprof.inference.failures",
    "QueuePolicy": "aiprof.inference.policy",
    "RequestRejectedError": "aiprof.inference.failures",
    "SimulationOptions": "aiprof.inference.simulator",
    "TuneOptions": "aiprof.inference.tune",
    "analyze_padding": "aiprof.inference.padding",
    "simulate": "aiprof.inference.simulator",
    "tune_policy": "aiprof.inference.tune",
}

__all__ = [
    "BatchFailedError",
    "BatchPolicy",
    "BatchingMetrics",
    "DynamicBatcher",
    "FakeClock",
    "LatencyCurve",
    "LoopClock",
    "ModelOutputError",
    "PaddingOptions",
    "PaddingReport",
    "QueueFullError",
    "QueuePolicy",
    "RequestRejectedError",
    "SimulationOptions",
    "TuneOptions",
    "analyze_padding",
    "simulate",
    "tune_policy",
]

__getattr__ = lazy_names("aiprof.inference", _WHERE, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
