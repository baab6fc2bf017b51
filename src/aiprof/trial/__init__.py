"""``aiprof try``: measure fixes on the user's own script, applied from outside, interleaved.

Torch-free: round scheduling, statistics and the verdict, the numerics guard, the result
dataclasses, the ``aiprof.try/1`` document and the try record. The variant processes (which
import torch and apply the fixes) are ``aiprof.measure.fixes``.
"""
