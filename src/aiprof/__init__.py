"""aiprof: explain the performance of PyTorch workloads and say what to change.

The library API mirrors the commands: ``load_trace`` / ``load_traces`` read profiler
traces, ``summary`` summarizes them, ``diagnose`` ranks what to change and how much it
gains, ``analyze_model`` costs a model's ops, ``profile`` / ``step`` capture a run in code
and ``load_run`` reads a run record.
"""

from aiprof.analysis.summary import summary
from aiprof.capture import profile, step
from aiprof.diagnose import diagnose
from aiprof.errors import AiprofError, InputError, TraceFormatError, UnsupportedDeviceError
from aiprof.runrecord import RunRecord, load_run
from aiprof.tensor.model_analysis import analyze_model
from aiprof.trace import Trace, TraceSet, load_trace, load_traces

__all__ = [
    "AiprofError",
    "InputError",
    "RunRecord",
    "Trace",
    "TraceFormatError",
    "TraceSet",
    "UnsupportedDeviceError",
    "analyze_model",
    "diagnose",
    "load_run",
    "load_trace",
    "load_traces",
    "profile",
    "step",
    "summary",
]
