"""Chapter 33.2, tensor operations: FLOPs and bytes per op, roofline, layout, alignment, fusion,
reuse and tiling, memory timeline. Nothing here imports torch; what runs a model or measures
the device (``analyze_model``, ``verify_fusion``, ``measure_ceilings``) is in
``aiprof.measure.tensor``."""

from aiprof.tensor.ceilings_model import Ceilings, ceilings_for_gpu, load_ceilings, save_ceilings
from aiprof.tensor.costmodel import CostSummary, has_cost_model, op_cost, summarize
from aiprof.tensor.opcall import OpCall, TensorMeta
from aiprof.tensor.opcost import OpCost
from aiprof.tensor.roofline import RooflinePoint, place

__all__ = [
    "Ceilings",
    "CostSummary",
    "OpCall",
    "OpCost",
    "RooflinePoint",
    "TensorMeta",
    "ceilings_for_gpu",
    "has_cost_model",
    "load_ceilings",
    "op_cost",
    "place",
    "save_ceilings",
    "summarize",
]
