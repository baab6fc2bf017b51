"""How a batch's inputs get from the registered slots into the model's input buffer.

Three ways, by name (``ServingEngine(assembly=...)``):

- ``gather``: one ``torch.index_select`` of the batch's rows into the instance's host buffer,
  then one copy of the buffer to the device. Above ``at::internal::GRAIN_SIZE`` (32,768 elements,
  pytorch/pytorch ``aten/src/ATen/Parallel.h``) ATen splits the gather over its intra-op thread
  team, which sleeps between batches and wakes for each: on the H200 (2026-12-01) a ResNet-50
  batch's assembly cost 2.1-3.8x under load what it cost alone, and 250-330 us of those threads'
  CPU per request.
- ``take``: the same rows copied by one ``numpy.take`` in the assembling thread (numpy runs it in
  one thread, the GIL released), then the same one copy to the device.
- ``direct``: no host buffer: each request's row is copied from the registered inputs (pinned)
  straight into the device's input buffer, one asynchronous copy per request on the stream, as
  Triton's backends gather a batch's inputs request by request (triton-inference-server/backend,
  ``BackendInputCollector``). CUDA only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aiprof.errors import InputError
from aiprof.measure.inference.bench import import_torch

ASSEMBLIES = ("gather", "take", "direct")
"""Every way of assembling a batch, by name."""


def check_assembly(name: str, cuda: bool) -> str:
    """``name`` if it is an assembly this device can run (InputError otherwise)."""
    if name not in ASSEMBLIES:
        raise InputError(f"assembly {name!r}: choose one of {', '.join(ASSEMBLIES)}")
    if name == "direct" and not cuda:
        raise InputError("assembly 'direct' copies straight into a CUDA buffer: serve on "
                         "--device cuda, or assemble with 'take' or 'gather'")
    return name


def byte_rows(tensor: Any) -> np.ndarray:
    """A numpy view of ``tensor``'s rows as bytes, shape (rows, bytes per row): numpy has no
    bfloat16, but a copy of bytes needs none."""
    torch = import_torch()
    flat = tensor.reshape(tensor.shape[0], -1)
    rows: np.ndarray = (flat.view(torch.uint8) if flat.element_size() != 1 else flat).numpy()
    return rows


class Assembler:
    """Fills an instance's host buffer (``to_host``, before the device lock) and then the device's
    input buffer (``to_device``, under the lock, on the stream) with the rows of ``slots``."""

    def __init__(self, name: str, inputs: Any) -> None:
        self.name = name
        self._torch = import_torch()
        self._inputs = inputs
        self._rows = byte_rows(inputs) if name == "take" else None
        self._input_rows = list(inputs.unbind(0)) if name == "direct" else []
        self._device_rows: list[Any] = []

    def to_host(self, slots: list[int], host_in: Any, host_rows: np.ndarray | None) -> None:
        """Before the lock: the batch's rows into ``host_in`` (``direct``: nothing)."""
        size = len(slots)
        if self.name == "gather":
            index = self._torch.tensor(slots, dtype=self._torch.int64)
            self._torch.index_select(self._inputs, 0, index, out=host_in[:size])
        elif self.name == "take":
            assert self._rows is not None and host_rows is not None
            # mode="clip": no buffered copy of out (numpy.take's docs: out "is always buffered
            # if mode='raise'"); the front end checked every slot already
            np.take(self._rows, slots, axis=0, out=host_rows[:size], mode="clip")

    def to_device(self, slots: list[int], host_in: Any, dev_in: Any, padded: int) -> None:
        """Under the lock, on the stream: the batch into the device buffer, up to ``padded``."""
        if self.name != "direct":
            dev_in[:padded].copy_(host_in[:padded], non_blocking=True)
            return
        if not self._device_rows:  # views made once: the per-batch Python is one list
            self._device_rows = list(dev_in.unbind(0))
        rows = self._input_rows  # pinned: asynchronous copies that the host does not stage
        # one call for the batch (torch.optim's foreach copies), so the GIL is given up and
        # taken back once, not once per request; the rows past the batch keep earlier inputs
        targets, sources = self._device_rows[:len(slots)], [rows[s] for s in slots]
        if hasattr(self._torch, "_foreach_copy_"):  # (torch 2.1 and later)
            self._torch._foreach_copy_(targets, sources, non_blocking=True)
            return
        for target, source in zip(targets, sources, strict=True):
            target.copy_(source, non_blocking=True)
