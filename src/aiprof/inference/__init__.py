"""Inference performance (chapter 33.3): dynamic batcher, simulator, tuning, padding analysis.

These names import without torch; what runs a model (latency curves, stages, cold start, CUDA
graphs, INT8, the serving engine) is in ``aiprof.measure.inference``. Each name is imported when
first used (PEP 562), so the load-generator process (``aiprof.inference.loadclient``) starts
without the batcher, the simulator and the tuner.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

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
    "BatchFailedError": "failures",
    "BatchPolicy": "policy",
    "BatchingMetrics": "metrics",
    "DynamicBatcher": "batcher",
    "FakeClock": "clock",
    "LatencyCurve": "latency_curve",
    "LoopClock": "clock",
    "ModelOutputError": "failures",
    "PaddingOptions": "padding",
    "PaddingReport": "padding",
    "QueueFullError": "failures",
    "QueuePolicy": "policy",
    "RequestRejectedError": "failures",
    "SimulationOptions": "simulator",
    "TuneOptions": "tune",
    "analyze_padding": "padding",
    "simulate": "simulator",
    "tune_policy": "tune",
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


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'aiprof.inference' has no attribute {name!r}")
    return getattr(import_module(f"aiprof.inference.{_WHERE[name]}"), name)
