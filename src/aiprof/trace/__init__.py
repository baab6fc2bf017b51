"""Read PyTorch profiler (Kineto/Chrome) traces into columnar tables."""

from aiprof.trace.model import Trace, TraceSet
from aiprof.trace.reader import load_trace, load_traces

__all__ = ["Trace", "TraceSet", "load_trace", "load_traces"]
