"""The sentence that says how much profiler time the diagnosis took out, for every renderer."""

from __future__ import annotations

from aiprof.diagnose.calibration import Calibration


def profiler_line(profiler: Calibration) -> str:
    """How much profiler time per recorded event the gains leave out, and why that much."""
    unprofiled = profiler.unprofiled_step_us
    source = profiler.source
    if source == "fitted":
        how = (f"fitted to the step measured without the profiler, {unprofiled / 1000:.3f} ms"
               if unprofiled else "fitted")
    elif source == "given":
        how = "given"
    elif source == "estimated":
        how = "estimated from the trace's op nesting"
    else:
        how = "default"
    if source in ("estimated", "default"):
        scale = profiler.gpu_scale
        how += (f"; the unprofiled {unprofiled / 1000:.3f} ms step is GPU-bound: GPU ops "
                f"replayed {scale:.3f}x as long" if unprofiled
                else ": no step time measured without the profiler")
    return f"profiler cost taken out: {profiler.overhead_us:.2f} µs per recorded event ({how})"
