"""The serving path's model function: a batch assembled into a preallocated host buffer (pinned on
CUDA; or copied request by request straight into the device's, ``assembly="direct"``), then the
copy in, the forward and the copy back on one CUDA stream, double buffered.

The batcher runs ``num_buffers`` instances of this function in threads of their own; each call
takes a free buffer set, so while one batch's copies and forward run on the stream the next is
assembled into the other buffer, then queued behind it on the same stream (stream order keeps
them apart; a CUDA event per buffer says when its batch is back). This is Triton's arrangement
of two model instances on one GPU (``instance_group``: "multiple instances ... overlap memory
transfer with compute", triton-inference-server/server ``docs/user_guide/model_configuration.md``)
and the double buffering of the CUDA C++ Programming Guide's "Overlapping Behavior" (copies from
page-locked memory on a stream overlap work on the device).

On CUDA the forward of each batch-size bucket (powers of two up to the maximum) is captured in a
CUDA graph (PyTorch's CUDA-graphs recipe, ``torch.cuda.graph``), so a batch costs the host one
replay instead of a launch per kernel and the event loop's thread is not starved of the GIL; a
batch is padded to its bucket. A model that cannot be captured runs eagerly (``execution`` says
which). On the CPU the "device" is a lock around the forward, the same single queue, and torch
gets ``cpu_threads`` intra-op threads (default 1): the host stage needs a core of its own, and on a
shared 2-core VM (2026-12-01) a team of two OpenMP threads made a 0.05 ms forward take 31 ms
whenever one of them was descheduled.

Requests name one of ``num_slots`` inputs registered beforehand (``inputs``), as perf_analyzer's
shared-memory mode does; assembling a batch copies those rows where the model reads them, by
default with one ``numpy.take`` in the instance's thread (:mod:`aiprof.measure.inference.assembly`
says the ways and why).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from aiprof.errors import UnsupportedDeviceError
from aiprof.inference.latency_curve import TimeSpread
from aiprof.measure.inference.assembly import Assembler, byte_rows, check_assembly
from aiprof.measure.inference.bench import import_torch


@dataclass(frozen=True, kw_only=True)
class BatchCosts:
    """Median costs per batch size of the batches an engine ran, microseconds."""

    batch_sizes: tuple[int, ...]
    num_batches: tuple[int, ...]
    host_us: tuple[float, ...]
    """Assembling the batch into its host buffer."""
    device_us: tuple[float, ...]
    """Copy in, forward, copy back (CUDA events on a GPU; the locked forward on the CPU)."""
    wall_us: tuple[float, ...]
    """The whole call, from the batcher handing the batch over to the results being ready."""
    lock_wait_us: tuple[float, ...] = ()
    """Waiting for the other instance to finish queueing its batch on the device."""
    sync_wait_us: tuple[float, ...] = ()
    """Waiting (asleep, the GIL free) for the batch's CUDA event; the locked forward on the CPU."""
    outside_device_us: tuple[float, ...] = ()
    """The call minus its wait for the device: assembling the batch and queueing its work, as
    the serving threads pay them (the simulator's host stage)."""
    mean_wall_us: float = float("nan")
    """The whole call's mean over the requests (each request counts its batch's call, as the
    batcher's ``compute_mean_us`` does)."""
    median_wall_us: float = float("nan")
    """The whole call's median over the requests, as the batcher's ``compute_p50_us``: the
    batcher's minus it is the hand-off to and from the model thread."""
    wall_p90_us: tuple[float, ...] = ()
    """The whole call's 90th percentile per batch size: how far a batch of a size runs past its
    median (near saturation a long batch lets the queue pile up; the simulator, given the
    medians, never sees one). Empty in records made before it."""
    device_p90_us: tuple[float, ...] = ()
    """The device time's 90th percentile per batch size (empty in older records)."""
    wake_us: tuple[float, ...] = ()
    """The wait for the results minus the device time, median over the batches that found the
    stream clear (the batch before them done when they took the lock; NaN: none did): the
    thread's lag past the device, its wake from the event and the GIL taken back, less its
    queueing that ran beside the device (``SimulationOptions.wake_us``). Empty in older
    records."""
    num_clear_batches: tuple[int, ...] = ()
    """How many batches of each size found the stream clear (``wake_us``'s sample)."""


@dataclass
class _Buffers:
    host_in: Any
    host_rows: np.ndarray
    """``host_in`` as numpy byte rows (for ``take``)."""
    host_out: Any
    start: Any
    end: Any


def output_head(model: Any) -> Callable[[Any], Any]:
    """``model`` followed by a reduction to one int32 per row (the value sent back)."""
    torch = import_torch()

    def head(inputs: Any) -> Any:
        out = model(inputs)
        if not isinstance(out, torch.Tensor):
            out = out[0]  # a tuple or a transformers ModelOutput: its first tensor
        return out.float().flatten(1).argmax(1).to(torch.int32)

    return head


def buckets(max_batch: int) -> tuple[int, ...]:
    """Batch sizes captured as graphs: powers of two below ``max_batch``, and ``max_batch``."""
    sizes = [1 << i for i in range(max_batch.bit_length()) if 1 << i < max_batch]
    return (*sizes, max_batch)


class ServingEngine:
    """A batcher model function over registered inputs; payloads are ``(request id, slot)``."""

    def __init__(self, model: Any, inputs: Any, *, device: str = "cpu", max_batch: int = 32,
                 num_buffers: int = 2, cuda_graphs: bool = True,
                 cpu_threads: int | None = 1, assembly: str = "take") -> None:
        torch = import_torch()
        self._torch = torch
        self.device = torch.device(device)
        self.cuda = is_cuda(device)
        if not self.cuda and cpu_threads:
            torch.set_num_threads(cpu_threads)
        self.max_batch = max_batch
        self.num_buffers = num_buffers
        self.assembly = check_assembly(assembly, self.cuda)
        self.inputs = inputs.contiguous()
        if assembly == "direct":  # copied straight to the device: pinned, or the host stages it
            self.inputs = self.inputs.pin_memory()
        self._assembler = Assembler(assembly, self.inputs)
        self.num_slots = int(inputs.shape[0])
        self.model = model.to(self.device).eval()
        self._head = output_head(self.model)
        row = tuple(inputs.shape[1:])
        self._free: queue.SimpleQueue[_Buffers] = queue.SimpleQueue()
        for _ in range(num_buffers):
            self._free.put(self._buffers(row, inputs.dtype))
        self._lock = threading.Lock()
        self._stream = torch.cuda.Stream(self.device) if self.cuda else None
        self._dev_in: Any = (torch.zeros((max_batch, *row), dtype=inputs.dtype,
                                         device=self.device) if self.cuda else None)
        self._graphs: dict[int, tuple[Any, Any]] = {}
        self._records: list[tuple[int, float, float, float, float, float, float]] = []
        self._last_end: Any = None
        """The end event of the batch queued last on the stream (None: none yet)."""
        self.execution = "eager"
        self.capture_error = ""
        if self.cuda and cuda_graphs:
            self._capture()

    def _buffers(self, row: tuple[int, ...], dtype: Any) -> _Buffers:
        torch = self._torch
        pin = self.cuda
        # zeroed: the rows past a batch, up to its bucket, are computed too and must be valid
        host_in = torch.zeros((self.max_batch, *row), dtype=dtype, pin_memory=pin)
        host_out = torch.zeros(self.max_batch, dtype=torch.int32, pin_memory=pin)
        # blocking: the waiting thread sleeps (cudaEventBlockingSync) instead of spinning a core
        # (CUDA Runtime API, cudaEventCreateWithFlags); at 40% load on the H200 two spinning
        # waits made the serving process burn 840 us of CPU per request (2026-12-01)
        events = ([torch.cuda.Event(enable_timing=True, blocking=True) for _ in range(2)]
                  if self.cuda else [None, None])
        return _Buffers(host_in, byte_rows(host_in), host_out, events[0], events[1])

    def _capture(self) -> None:
        torch = self._torch
        try:
            with torch.inference_mode():
                side = torch.cuda.Stream(self.device)
                side.wait_stream(torch.cuda.current_stream(self.device))
                with torch.cuda.stream(side):
                    for size in buckets(self.max_batch):
                        for _ in range(3):  # warm-up before capture, as the recipe says
                            self._head(self._dev_in[:size])
                torch.cuda.current_stream(self.device).wait_stream(side)
                for size in buckets(self.max_batch):
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        out = self._head(self._dev_in[:size])
                    self._graphs[size] = (graph, out)
            torch.cuda.synchronize(self.device)
            self.execution = "cuda graphs"
        except Exception as error:  # a model that cannot be captured still serves, eagerly
            self._graphs.clear()
            self.capture_error = f"{type(error).__name__}: {error}"[:300]
            torch.cuda.synchronize(self.device)

    @property
    def buckets(self) -> tuple[int, ...]:
        """The batch sizes of the captured graphs (empty when the forward runs eagerly)."""
        return tuple(sorted(self._graphs))

    def bucket(self, size: int) -> int:
        """The batch size a batch of ``size`` runs at (its graph's; itself when eager)."""
        if not self._graphs:
            return size
        return min(b for b in self._graphs if b >= size)

    def __call__(self, payloads: list[tuple[int, int]]) -> list[int]:
        size = len(payloads)
        buffers = self._free.get()
        try:
            begin = time.perf_counter_ns()
            slots = [slot for _, slot in payloads]
            self._assembler.to_host(slots, buffers.host_in, buffers.host_rows)
            assembled = time.perf_counter_ns()
            device_us, lock_ns, sync_ns, clear = self._run(buffers, slots)
            values: list[int] = buffers.host_out[:size].tolist()
            done = time.perf_counter_ns()
        finally:
            self._free.put(buffers)
        self._records.append((size, (assembled - begin) / 1e3, device_us, (done - begin) / 1e3,
                              (lock_ns - assembled) / 1e3, (done - sync_ns) / 1e3,
                              1.0 if clear else 0.0))
        return values

    def _run(self, buffers: _Buffers, slots: list[int]) -> tuple[float, int, int, bool]:
        """Device work of one batch: its device time in microseconds, when the device lock was
        taken and when the wait for the results began (``perf_counter_ns``), and whether the
        stream was clear when it was queued (the batch before it done: its wait for the results
        is then its device time and the thread's lag, no other batch's work)."""
        torch = self._torch
        padded = self.bucket(len(slots))
        with torch.inference_mode():
            if not self.cuda:
                with self._lock:
                    start = time.perf_counter_ns()
                    buffers.host_out[:padded].copy_(self._head(buffers.host_in[:padded]))
                    return (time.perf_counter_ns() - start) / 1e3, start, start, True
            assert self._stream is not None and self._dev_in is not None
            with self._lock, torch.cuda.stream(self._stream):  # one batch's work, in order
                locked = time.perf_counter_ns()
                clear = self._last_end is None or bool(self._last_end.query())
                buffers.start.record(self._stream)
                self._assembler.to_device(slots, buffers.host_in, self._dev_in, padded)
                if self._graphs:
                    graph, out = self._graphs[padded]
                    graph.replay()
                else:
                    out = self._head(self._dev_in[:padded])
                buffers.host_out[:padded].copy_(out, non_blocking=True)
                buffers.end.record(self._stream)
                self._last_end = buffers.end
            waiting = time.perf_counter_ns()
            buffers.end.synchronize()  # asleep, the GIL released, while the stream works
            return (float(buffers.start.elapsed_time(buffers.end)) * 1e3, locked, waiting,
                    clear)

    def mark(self) -> int:
        """A position in the record of batches, for :meth:`costs_since`."""
        return len(self._records)

    def spread_since(self, mark: int = 0, min_batches: int = 3) -> BatchSpread:
        """The batches run since ``mark``: each one's device time and host stage over its size's
        median, pooled by bucket (sizes run fewer than ``min_batches`` times left out: their
        median is no reference)."""
        rows = np.asarray(self._records[mark:], dtype=np.float64).reshape(-1, 7)
        device: dict[int, list[float]] = {}
        host: dict[int, list[float]] = {}
        for size in sorted({int(s) for s in rows[:, 0]}):
            picked = rows[rows[:, 0] == size]
            if len(picked) < min_batches:
                continue
            outside = picked[:, 3] - picked[:, 5]
            for column, into in ((picked[:, 2], device), (outside, host)):
                median = float(np.median(column))
                if median > 0:
                    into.setdefault(self.bucket(size), []).extend((column / median).tolist())
        return BatchSpread(device=TimeSpread.from_factors(device),
                           host=TimeSpread.from_factors(host))

    def costs_since(self, mark: int = 0) -> BatchCosts:
        """Median host, device and wall time per batch size of the batches run since ``mark``."""
        rows = np.asarray(self._records[mark:], dtype=np.float64).reshape(-1, 7)
        sizes = sorted({int(s) for s in rows[:, 0]})
        picked = [rows[rows[:, 0] == s] for s in sizes]

        def medians(column: int) -> tuple[float, ...]:
            return tuple(float(np.median(p[:, column])) for p in picked)

        def p90(column: int) -> tuple[float, ...]:
            return tuple(float(np.percentile(p[:, column], 90)) for p in picked)

        clear = [p[p[:, 6] > 0] for p in picked]

        return BatchCosts(
            batch_sizes=tuple(sizes), num_batches=tuple(len(p) for p in picked),
            host_us=medians(1), device_us=medians(2), wall_us=medians(3),
            lock_wait_us=medians(4), sync_wait_us=medians(5), wall_p90_us=p90(3),
            device_p90_us=p90(2),
            wake_us=tuple(float(np.median(c[:, 5] - c[:, 2])) if len(c) else float("nan")
                          for c in clear),
            num_clear_batches=tuple(len(c) for c in clear),
            outside_device_us=tuple(float(np.median(p[:, 3] - p[:, 5])) for p in picked),
            mean_wall_us=(float(np.average(rows[:, 3], weights=rows[:, 0])) if rows.size
                          else float("nan")),
            median_wall_us=(float(np.median(np.repeat(rows[:, 3], rows[:, 0].astype(np.int64))))
                            if rows.size else float("nan")))


@dataclass(frozen=True, kw_only=True)
class BatchSpread:
    """How far the batches an engine ran strayed from their size's median, per bucket (the size a
    batch runs at): the device time and the host stage (the call minus its wait for the device),
    as the simulator draws them (:class:`~aiprof.inference.latency_curve.TimeSpread`)."""

    device: TimeSpread | None
    host: TimeSpread | None


def is_cuda(device: str) -> bool:
    """Whether ``device`` is a CUDA device (UnsupportedDeviceError when this machine has
    none)."""
    torch = import_torch()
    cuda = bool(torch.device(device).type == "cuda")
    if cuda and not torch.cuda.is_available():
        raise UnsupportedDeviceError(f"device {device}: this machine has no CUDA device; "
                                     "serve on --device cpu")
    return cuda


def registered_inputs(make_input: Callable[[int], Any], num_slots: int, dtype: Any = None) -> Any:
    """``num_slots`` inputs from the model's input maker (cast to ``dtype`` when floating)."""
    inputs = make_input(num_slots)
    if dtype is not None and inputs.is_floating_point():
        inputs = inputs.to(dtype)
    return inputs.contiguous()
