"""Chapter 33.2, tensor operations: FLOPs and bytes per op, roofline, layout, alignment, fusion,
reuse and tiling, memory timeline. Nothing here imports torch at import time; ``analyze_model``,
``verify_fusion`` and ``measure_ceilings`` import it when called."""

from aiprof.tensor.ceilings_model import Ceilings, ceilings_for_gpu, load_ceilings, save_ceilings
from aiprof.tensor.costmodel import CostSummary, has_cost_model, op_cost, summarize
from aiprof.tensor.model_analysis import ModelAnalysis, OpRecord, analyze_model
from aiprof.tensor.opcall import OpCall, TensorMeta
from aiprof.tensor.opcost import OpCost
from aiprof.tensor.roofline import RooflinePoint, place

__all__ = [
    "Ceilings",
    "CostSummary",
    "ModelAnalysis",
    "OpCall",
    "OpCost",
    "OpRecord",
    "RooflinePoint",
    "TensorMeta",
    "analyze_model",
    "ceilings_for_gpu",
    "has_cost_model",
    "load_ceilings",
    "op_cost",
    "place",
    "save_ceilings",
    "summarize",
]
