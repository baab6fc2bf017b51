"""Capture a PyTorch workload into a run record (``aiprof run``, ``aiprof.profile``).

Importing this package does not import torch; a capture imports it when it starts.
"""

from aiprof.capture.api import profile, step
from aiprof.capture.options import CaptureOptions

__all__ = ["CaptureOptions", "profile", "step"]
