"""aiprof: explain the performance of PyTorch workloads and say what to change.

The library API mirrors the commands: ``load_trace`` / ``load_traces`` read profiler
traces, ``summary`` summarizes them, ``diagnose`` ranks what to change and how much it
gains, ``analyze_model`` costs a model's ops, ``profile`` / ``step`` capture a run in code
and ``load_run`` reads a run record.

Each name is imported when first used (PEP 562), so reading and summarizing a trace does
not load the diagnosis, capture and model code (about 11 MiB of memory in every process).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiprof.display import register_html
from aiprof.errors import AiprofError, InputError, TraceFormatError, UnsupportedDeviceError
from aiprof.lazy import lazy_names

if TYPE_CHECKING:
    from aiprof.analysis.summary import summary
    from aiprof.capture import profile, step
    from aiprof.diagnose import diagnose
    from aiprof.measure.tensor.model_analysis import analyze_model
    from aiprof.record.runrecord import RunRecord, load_run
    from aiprof.record.targets import load_traces
    from aiprof.trace import Trace, TraceSet, load_trace

_WHERE = {
    "summary": "aiprof.analysis.summary",
    "profile": "aiprof.capture",
    "step": "aiprof.capture",
    "diagnose": "aiprof.diagnose",
    "RunRecord": "aiprof.record.runrecord",
    "load_run": "aiprof.record.runrecord",
    "analyze_model": "aiprof.measure.tensor.model_analysis",
    "Trace": "aiprof.trace",
    "TraceSet": "aiprof.trace",
    "load_trace": "aiprof.trace",
    "load_traces": "aiprof.record.targets",
}


def _diagnosis_html(result: object) -> str:
    from aiprof.diagnose.finding import Diagnosis
    from aiprof.report.html import diagnosis_fragment

    assert isinstance(result, Diagnosis)
    return diagnosis_fragment(result)


# The face is the one layer that sees both the result and its renderer (aiprof/display.py).
register_html("aiprof.diagnose.finding.Diagnosis", _diagnosis_html)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aiprof")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


def _computed(name: str) -> Any:
    if name == "__version__":
        return _version()
    raise AttributeError(f"module 'aiprof' has no attribute {name!r}")


__getattr__ = lazy_names("aiprof", _WHERE, globals(), _computed)


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "__version__",
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
