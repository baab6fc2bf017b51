"""``bf16``: autocast to bfloat16 around the script's steps. Numerics change.

How: ``torch.autocast(device_type, dtype=torch.bfloat16)`` is entered before the script runs
(in the main thread, where the forward passes run) and stays on; at every step boundary its
cast cache is cleared (``torch.clear_autocast_cache()``), as leaving a per-step autocast
block would, so the bf16 copies of weights the optimizer just changed are made again.
Does not apply: a CUDA GPU without bf16 (``torch.cuda.is_bf16_supported()`` false). Ops
under the script's own ``autocast`` blocks keep the script's dtype. On CPU it runs (CPU
autocast) and is measured. The loss moves by bf16's 8-bit mantissa: the numerics guard
compares it with the base's.
"""

from __future__ import annotations

from typing import Any

from aiprof.measure.fixes.base import Fix, cuda_available


class Bf16(Fix):
    name = "bf16"

    def __init__(self) -> None:
        super().__init__()
        self._context: Any = None

    def before_script(self, torch: Any) -> None:
        device = "cuda" if cuda_available(torch) else "cpu"
        if device == "cuda" and not torch.cuda.is_bf16_supported():
            self.not_applicable = "the GPU does not support bf16"
            return
        self._context = torch.autocast(device_type=device, dtype=torch.bfloat16)
        self._context.__enter__()
        self.facts["autocast_device"] = device
        self.notes.append("numerics change: matmuls and convolutions run in bf16")

    def at_step(self, torch: Any, step: int, optimizer: object | None) -> None:
        if self._context is not None:
            torch.clear_autocast_cache()
            if step == 1:
                device = self.facts["autocast_device"]
                self.facts["autocast_enabled"] = bool(torch.is_autocast_enabled(device))
