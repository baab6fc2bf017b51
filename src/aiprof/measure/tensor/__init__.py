"""Tensor operations measured: ops recorded by running a model, ceilings, fusion verified."""

from aiprof.measure.tensor.model_analysis import ModelAnalysis, OpRecord, analyze_model

__all__ = ["ModelAnalysis", "OpRecord", "analyze_model"]
