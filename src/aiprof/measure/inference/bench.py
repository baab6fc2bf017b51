"""Measure a PyTorch model's latency curve and serve it through the real batcher.

``MODULE:FACTORY`` names a function returning either a ``torch.nn.Module`` (inputs then come from
``input_shape``) or a pair ``(model, make_input)`` with ``make_input(batch_size) -> Tensor``.
MODULE is an importable module or a path to a ``.py`` file. torch is imported inside functions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiprof import optional
from aiprof.errors import InputError
from aiprof.factory import one_line, resolve_factory
from aiprof.inference.latency_curve import LatencyCurve
from aiprof.measure.timing import Timing, time_calls


@dataclass(frozen=True, kw_only=True)
class MeasuredCurve:
    """Latency per batch size of one model on one device."""

    device: str
    batch_sizes: tuple[int, ...]
    timings: tuple[Timing, ...]

    def curve(self) -> LatencyCurve:
        """The median latencies as a :class:`LatencyCurve` for the simulator."""
        return LatencyCurve(
            batch_sizes=self.batch_sizes, latency_us=tuple(t.p50_us for t in self.timings)
        )


def import_torch() -> Any:
    """torch, or a MissingDependencyError saying how to install it."""
    return optional.import_torch("running a model")


def load_factory(spec: str) -> Callable[[], Any]:
    """The factory named by ``MODULE:FACTORY``; calling it raises InputError on any failure."""
    import_torch()
    factory = resolve_factory(spec)

    def call() -> Any:
        try:
            return factory()
        except Exception as error:
            raise InputError(
                f"model factory {spec} failed: {one_line(error)}"
            ) from error

    return call


def load_model(
    spec: str, input_shape: Sequence[int] | None = None
) -> tuple[Any, Callable[[int], Any]]:
    """The model and an input maker from ``MODULE:FACTORY``; any failure is an InputError."""
    torch = import_torch()
    made = load_factory(spec)()
    if isinstance(made, tuple) and len(made) == 2:
        return made[0], made[1]
    if input_shape is None:
        raise InputError(f"{spec} returned only a model: give --input-shape (e.g. 3,224,224)")
    shape = tuple(input_shape)
    return made, lambda batch: torch.randn(batch, *shape)


def measure_curve(
    model: Any,
    make_input: Callable[[int], Any],
    batch_sizes: Sequence[int],
    *,
    device: str = "cpu",
    warmup: int = 3,
    iters: int = 20,
) -> MeasuredCurve:
    """Forward latency at each batch size (inputs already on the device)."""
    torch = import_torch()
    model = model.to(device).eval()
    timings = []
    with torch.inference_mode():
        for batch in sorted(set(batch_sizes)):
            inputs = make_input(batch).to(device)
            samples = time_calls(
                functools.partial(model, inputs), device=device, warmup=warmup, iters=iters
            )
            timings.append(Timing.of(samples))
    return MeasuredCurve(
        device=device, batch_sizes=tuple(sorted(set(batch_sizes))), timings=tuple(timings)
    )


def batch_function(model: Any, device: str = "cpu") -> Callable[[list[Any]], list[Any]]:
    """A batcher model function: stack single inputs, run the model, split the outputs."""
    torch = import_torch()
    model = model.to(device).eval()

    def run(inputs: list[Any]) -> list[Any]:
        with torch.inference_mode():
            out = model(torch.stack(inputs).to(device))
            if isinstance(out, (tuple, list)):
                out = out[0]
            return list(out.cpu().unbind(0))

    return run


def measure_serving_curve(
    model_fn: Callable[[list[Any]], Any], sample: Any, batch_sizes: Sequence[int], *,
    warmup: int = 2, iters: int = 10,
) -> MeasuredCurve:
    """Wall time of the batcher's model function per batch size: stacking the inputs on the host,
    copying them, the forward, copying back and splitting (what a batch really costs the server).
    The function returns host tensors, so its wall time includes the device work."""
    sizes = tuple(sorted(set(batch_sizes)))
    timings = []
    for batch in sizes:
        inputs = [sample] * batch
        samples = time_calls(functools.partial(model_fn, inputs), warmup=warmup, iters=iters)
        timings.append(Timing.of(samples))
    return MeasuredCurve(device="serving path", batch_sizes=sizes, timings=tuple(timings))

