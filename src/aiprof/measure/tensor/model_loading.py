"""Loading a user's model factory and building example inputs for ``aiprof model``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiprof.errors import InputError
from aiprof.factory import one_line, resolve_factory


def load_factory(spec: str) -> Any:
    """Call ``MODULE:FUNCTION`` (or ``path/file.py:FUNCTION``) and return the model it builds."""
    factory = resolve_factory(spec)
    try:
        return factory()
    except Exception as error:  # the user's code: report it in one line
        raise InputError(f"cannot build the model from {spec}: {one_line(error)}") from error


def _dtype(torch: Any, name: str) -> Any:
    value = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(value, torch.dtype):
        raise InputError(f"unknown dtype {name!r}: use float32, bfloat16, float16, int64 ...")
    return value


def prepare_model(model: Any, dtype: str | None, device: str, channels_last: bool) -> Any:
    """Move/cast the model as asked (eval mode is left to the factory)."""
    import torch

    if not isinstance(model, torch.nn.Module) and not callable(model):
        raise InputError("the factory must return a torch.nn.Module or a callable")
    if isinstance(model, torch.nn.Module):
        try:
            model = model.to(device)
        except (RuntimeError, AssertionError) as error:
            raise InputError(f"cannot move the model to {device}: {error}") from error
        if dtype:
            model = model.to(_dtype(torch, dtype))
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
    return model


def build_inputs(
    shapes: Sequence[str],
    input_dtype: str,
    dtype: str | None,
    device: str,
    channels_last: bool,
    vocab: int,
    seed: int,
) -> tuple[Any, ...]:
    """Random inputs of the given shapes (``"64,3,224,224"``), seeded."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    kind = _dtype(torch, input_dtype)
    inputs = []
    for text in shapes:
        try:
            shape = tuple(int(d) for d in text.replace("x", ",").split(",") if d.strip())
        except ValueError as error:
            raise InputError(
                f"--input-shape {text!r}: expected integers like 64,3,224,224"
            ) from error
        if not shape or min(shape) < 1:
            raise InputError(f"--input-shape {text!r}: every dimension must be >= 1")
        if kind.is_floating_point:
            tensor = torch.randn(shape, generator=generator).to(
                _dtype(torch, dtype) if dtype else kind
            )
        else:
            tensor = torch.randint(0, vocab, shape, generator=generator, dtype=kind)
        tensor = tensor.to(device)
        if channels_last and tensor.dim() == 4:
            tensor = tensor.to(memory_format=torch.channels_last)
        inputs.append(tensor)
    return tuple(inputs)
