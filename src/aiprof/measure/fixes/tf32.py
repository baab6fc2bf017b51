"""``tf32``: FP32 matmuls and convolutions on TF32 tensor cores.

How: ``torch.backends.cuda.matmul.allow_tf32 = True`` and ``torch.backends.cudnn.allow_tf32 =
True`` before the script runs, and again at the end of its first step (a script that turns
TF32 off at start-up is overridden; its first step is a warm-up step, never timed).
Does not apply: without a CUDA GPU of compute capability 8.0 or newer (TF32 starts with
Ampere; NVIDIA A100 whitepaper), the flags are set but change nothing.
Numerics: TF32 keeps 10 mantissa bits of FP32's 23 for the products.
"""

from __future__ import annotations

from typing import Any

from aiprof.measure.fixes.base import Fix, cuda_available

TF32_MIN_CAPABILITY = (8, 0)
"""First compute capability with TF32 tensor cores (NVIDIA A100 Tensor Core GPU whitepaper)."""


def _enable(torch: Any) -> None:
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True


class Tf32(Fix):
    name = "tf32"

    def before_script(self, torch: Any) -> None:
        _enable(torch)

    def at_step(self, torch: Any, step: int, optimizer: object | None) -> None:
        if step == 1:
            if not torch.backends.cuda.matmul.allow_tf32:
                self.notes.append("the script turned TF32 off; turned on again after step 1")
            _enable(torch)
            self.facts["matmul_allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)

    def finish(self, torch: Any) -> None:
        if not cuda_available(torch):
            self.not_applicable = "no CUDA device: TF32 flags set but only GPUs use them"
        elif torch.cuda.get_device_capability() < TF32_MIN_CAPABILITY:
            self.not_applicable = "the GPU has no TF32 tensor cores (compute capability < 8.0)"
