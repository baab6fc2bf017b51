"""``channels_last``: 4-D convolution weights and their inputs in NHWC memory order.

How: before the script runs, a forward pre-hook on every module
(``torch.nn.modules.module.register_module_forward_pre_hook``) converts each 2-D convolution
module it meets (``Conv2d``, ``ConvTranspose2d``: a 4-D ``weight``) with
``module.to(memory_format=torch.channels_last)`` -- in place, so the optimizer keeps the
same parameters -- and converts the module's 4-D tensor inputs with
``.contiguous(memory_format=torch.channels_last)``. After the first step the global hook is
replaced by pre-hooks on the converted convolutions only (a conv's output is already
channels_last, so most of those conversions are no-ops). Activations the script reshapes in
between may go back to NCHW; cuDNN then converts again.
Does not apply: no module with a 4-D convolution weight ran in the first step.
"""

from __future__ import annotations

from typing import Any

from aiprof.measure.fixes.base import Fix


class ChannelsLast(Fix):
    name = "channels_last"

    def __init__(self) -> None:
        super().__init__()
        self._converted: dict[int, Any] = {}
        self._handles: list[Any] = []
        self._global: Any = None

    def _inputs(self, torch: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(
            arg.contiguous(memory_format=torch.channels_last)
            if isinstance(arg, torch.Tensor) and arg.dim() == 4 else arg
            for arg in args)

    def before_script(self, torch: Any) -> None:
        conv = (torch.nn.Conv2d, torch.nn.ConvTranspose2d)

        def convert(module: Any, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
            if not isinstance(module, conv):
                return None
            if id(module) not in self._converted:
                module.to(memory_format=torch.channels_last)
                self._converted[id(module)] = module
            return self._inputs(torch, args)

        self._global = torch.nn.modules.module.register_module_forward_pre_hook(convert)

    def at_step(self, torch: Any, step: int, optimizer: object | None) -> None:
        if step != 1 or self._global is None:
            return
        self._global.remove()
        self._global = None
        for module in self._converted.values():
            self._handles.append(module.register_forward_pre_hook(
                lambda module, args: self._inputs(torch, args)))
        self.facts["converted_convs"] = len(self._converted)

    def finish(self, torch: Any) -> None:
        if not self._converted:
            self.not_applicable = "no 2-D convolution ran in the first step"
