"""Fixes ``aiprof try`` applies from outside the user's script, one module per fix.

Each module's docstring says exactly how the fix is applied and when it does not apply. They
run in the variant process (``aiprof.measure.fixes.variant``), which imports torch; the
torch-free list of names is ``aiprof.trial.catalog``.
"""

from aiprof.measure.fixes.base import Fix, NoFix
from aiprof.measure.fixes.bf16 import Bf16
from aiprof.measure.fixes.channels_last import ChannelsLast
from aiprof.measure.fixes.compile import Compile
from aiprof.measure.fixes.cudnn_benchmark import CudnnBenchmark
from aiprof.measure.fixes.dataloader import DataLoaderWorkers
from aiprof.measure.fixes.expandable_segments import ExpandableSegments
from aiprof.measure.fixes.fused_optimizer import FusedOptimizer
from aiprof.measure.fixes.no_empty_cache import NoEmptyCache
from aiprof.measure.fixes.tf32 import Tf32

FIX_CLASSES: dict[str, type[Fix]] = {
    cls.name: cls for cls in (NoFix, Tf32, Bf16, CudnnBenchmark, ChannelsLast,
                              DataLoaderWorkers, FusedOptimizer, NoEmptyCache,
                              ExpandableSegments, Compile)
}

__all__ = ["FIX_CLASSES", "Fix", "NoFix"]
