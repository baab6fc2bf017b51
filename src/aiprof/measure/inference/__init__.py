"""Inference measured on a real model: latency curves, stages, cold start, CUDA graphs, INT8."""
