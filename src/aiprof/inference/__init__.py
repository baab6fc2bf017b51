"""Inference performance (chapter 33.3): dynamic batcher, simulator, tuning, padding analysis.

These names import without torch; what runs a model (latency curves, stages, cold start, CUDA
graphs, INT8) is in ``aiprof.measure.inference``.
"""

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
