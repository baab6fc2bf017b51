"""``cudnn_benchmark``: cuDNN tries its convolution algorithms and keeps the fastest per shape.

How: ``torch.backends.cudnn.benchmark = True`` before the script runs and again after its
first step. The autotuning runs in the first steps for each new input shape (warm-up steps,
not timed); a script whose shapes change every step pays it again and again.
Does not apply: no CUDA device with cuDNN, or no convolution module (``torch.nn`` ``_ConvNd``)
ran in the first step (seen by a forward pre-hook on every module, removed after step 1).
"""

from __future__ import annotations

from typing import Any

from aiprof.measure.fixes.base import Fix, cuda_available


class CudnnBenchmark(Fix):
    name = "cudnn_benchmark"

    def __init__(self) -> None:
        super().__init__()
        self._remove: Any = None
        self._convs_seen = 0

    def before_script(self, torch: Any) -> None:
        torch.backends.cudnn.benchmark = True
        conv = torch.nn.modules.conv._ConvNd

        def seen(module: Any, args: Any) -> None:
            if isinstance(module, conv):
                self._convs_seen += 1

        self._remove = torch.nn.modules.module.register_module_forward_pre_hook(seen)

    def at_step(self, torch: Any, step: int, optimizer: object | None) -> None:
        if step == 1:
            torch.backends.cudnn.benchmark = True
            self.facts["cudnn_benchmark"] = bool(torch.backends.cudnn.benchmark)
            self.facts["conv_calls_step1"] = self._convs_seen
            if self._remove is not None:
                self._remove.remove()
                self._remove = None

    def finish(self, torch: Any) -> None:
        if not (cuda_available(torch) and torch.backends.cudnn.is_available()):
            self.not_applicable = "no CUDA device with cuDNN: the flag changes nothing"
        elif not self.facts.get("conv_calls_step1"):
            self.not_applicable = "no convolution ran in the first step"
