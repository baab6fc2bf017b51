"""aiprof: explain the performance of PyTorch workloads and say what to change.

The library API mirrors the commands: ``load_trace`` / ``load_traces`` read profiler
traces, ``summary`` summarizes them.
"""

from aiprof.analysis.summary import summary
from aiprof.errors import AiprofError, InputError, TraceFormatError, UnsupportedDeviceError
from aiprof.trace import Trace, TraceSet, load_trace, load_traces

__all__ = [
    "AiprofError",
    "InputError",
    "Trace",
    "TraceFormatError",
    "TraceSet",
    "UnsupportedDeviceError",
    "load_trace",
    "load_traces",
    "summary",
]
