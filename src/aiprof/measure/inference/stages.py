"""End-to-end image-inference pipeline, timed stage by stage (chapter 33.3 "inference pipeline").

Stages per batch: decode (JPEG through Pillow or torchvision when installed, else zlib-compressed
raw pixels), resize (bilinear), normalize, host-to-device copy from pageable and from pinned
memory, forward, device-to-host, postprocess (softmax + top-5). Each stage caps throughput at
``batch / stage time``; the CPU stages run one after another on the host, the copies and forward
on the device, so the pipeline is CPU-bound when the host stages' cap is the lower one.
torch is imported inside the functions.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from aiprof.errors import InputError
from aiprof.factory import one_line
from aiprof.measure.timing import Timing, is_cuda, time_calls

# ImageNet channel statistics used by torchvision's ResNet weights (torchvision docs, "transforms").
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
HOST_STAGES = ("decode", "resize", "normalize", "postprocess")


@dataclass(frozen=True, kw_only=True)
class StageTiming:
    """One stage's time per batch and the throughput it allows."""

    name: str
    where: str
    """``host`` or ``device``."""
    timing: Timing
    cap_items_per_s: float
    """Items per second if this stage alone ran back to back: batch / mean time."""


@dataclass(frozen=True, kw_only=True)
class StagesReport:
    """Every stage of the pipeline and the verdict."""

    device: str
    batch_size: int
    decoder: str
    stages: tuple[StageTiming, ...]
    host_cap_items_per_s: float
    device_cap_items_per_s: float
    bottleneck: str
    verdict: str
    """``cpu_bound`` or ``gpu_bound`` (``device_bound`` names the same on CPU-only runs)."""
    pinned_speedup: float | None
    """Pageable over pinned host-to-device time (None without a GPU)."""


def synthetic_image(height: int, width: int, seed: int = 0) -> np.ndarray:
    """A smooth HxWx3 uint8 test image (gradients plus noise), compressible like a photo."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 / width, y * 255 / height, (x + y) * 127 / (width + height)], axis=-1)
    return np.clip(base + rng.normal(0, 8, base.shape), 0, 255).astype(np.uint8)


def make_decoder(image: np.ndarray) -> tuple[str, Callable[[], Any]]:
    """The best available decoder for ``image`` encoded once: (name, decode function)."""
    torch = _torch()
    try:
        from PIL import Image

        buffer = io.BytesIO()
        Image.fromarray(image).save(buffer, format="JPEG", quality=90)
        data = buffer.getvalue()
        return "jpeg (Pillow)", lambda: torch.from_numpy(
            np.asarray(Image.open(io.BytesIO(data)).convert("RGB")))
    except ImportError:
        pass
    try:
        from torchvision.io import decode_jpeg, encode_jpeg

        encoded = encode_jpeg(torch.from_numpy(image).permute(2, 0, 1).contiguous(), quality=90)
        return "jpeg (torchvision)", lambda: decode_jpeg(encoded).permute(1, 2, 0)
    except ImportError:
        shape = image.shape
        packed = zlib.compress(image.tobytes(), 6)
        return "zlib raw (no JPEG decoder installed)", lambda: torch.from_numpy(
            np.frombuffer(zlib.decompress(packed), dtype=np.uint8).reshape(shape).copy())


def _torch() -> Any:
    from aiprof.measure.inference.bench import import_torch

    return import_torch()


def _stage(name: str, where: str, fn: Callable[[], Any], batch: int, device: str,
           warmup: int, iters: int) -> StageTiming:
    samples = time_calls(fn, device=device if where == "device" else "cpu", warmup=warmup,
                         iters=iters)
    timing = Timing.of(samples)
    return StageTiming(name=name, where=where, timing=timing,
                       cap_items_per_s=batch / timing.mean_us * 1e6)


def run_stages(model: Any, *, device: str = "cpu", batch_size: int = 8,
               source_hw: tuple[int, int] = (480, 640), input_hw: tuple[int, int] = (224, 224),
               warmup: int = 2, iters: int = 10, seed: int = 0,
               model_name: str = "the model") -> StagesReport:
    """Time every stage of the pipeline for batches of ``batch_size`` images."""
    if batch_size < 1 or iters < 1:
        raise InputError("batch size and iterations must be at least 1")
    torch = _torch()
    f = torch.nn.functional
    decoder_name, decode_one = make_decoder(synthetic_image(*source_hw, seed=seed))
    decoded = torch.stack([decode_one() for _ in range(batch_size)]).permute(0, 3, 1, 2)
    resized = f.interpolate(decoded.float(), size=input_hw, mode="bilinear", align_corners=False)
    mean = torch.tensor(MEAN).view(1, 3, 1, 1) * 255
    std = torch.tensor(STD).view(1, 3, 1, 1) * 255
    host = ((resized - mean) / std).contiguous()
    pinned = host.pin_memory() if is_cuda(device) else host
    model = model.to(device).eval()
    on_device = host.to(device)
    try:
        with torch.inference_mode():
            logits = model(on_device)
    except Exception as error:  # the user's model rejects the image batch: say so in one line
        shape = "x".join(str(n) for n in on_device.shape)
        raise InputError(f"{model_name} failed on a {shape} image batch ({one_line(error)}); "
                         "give the image size it takes with --input-shape 3,H,W") from error
    logits = logits[0] if isinstance(logits, (tuple, list)) else logits
    plan = [
        ("decode", "host", lambda: [decode_one() for _ in range(batch_size)]),
        ("resize", "host", lambda: f.interpolate(decoded.float(), size=input_hw,
                                                 mode="bilinear", align_corners=False)),
        ("normalize", "host", lambda: ((resized - mean) / std).contiguous()),
    ]
    if is_cuda(device):
        plan += [("h2d pageable", "device", lambda: host.to(device)),
                 ("h2d pinned", "device", lambda: pinned.to(device, non_blocking=True))]
    plan += [("forward", "device", lambda: _forward(torch, model, on_device)),
             ("d2h", "device", lambda: logits.to("cpu")),
             ("postprocess", "host", lambda: torch.softmax(logits.float().cpu(), -1).topk(5))]
    stages = tuple(_stage(n, w, fn, batch_size, device, warmup, iters) for n, w, fn in plan)
    return _verdict(stages, device, batch_size, decoder_name)


def _forward(torch: Any, model: Any, x: Any) -> Any:
    with torch.inference_mode():
        return model(x)


def _verdict(stages: tuple[StageTiming, ...], device: str, batch: int,
             decoder: str) -> StagesReport:
    by_name = {s.name: s for s in stages}
    host_us = sum(s.timing.mean_us for s in stages if s.where == "host")
    copy = "h2d pinned" if "h2d pinned" in by_name else None
    device_names = [n for n in ("forward", "d2h") if n in by_name] + ([copy] if copy else [])
    device_us = sum(by_name[n].timing.mean_us for n in device_names)
    host_cap, device_cap = batch / host_us * 1e6, batch / device_us * 1e6
    slowest = max(stages, key=lambda s: s.timing.mean_us)
    pinned_speedup = None
    if copy:
        pinned_speedup = by_name["h2d pageable"].timing.mean_us / by_name[copy].timing.mean_us
    bound = "cpu_bound" if host_cap < device_cap else (
        "gpu_bound" if is_cuda(device) else "device_bound")
    return StagesReport(device=device, batch_size=batch, decoder=decoder, stages=stages,
                        host_cap_items_per_s=host_cap, device_cap_items_per_s=device_cap,
                        bottleneck=slowest.name, verdict=bound, pinned_speedup=pinned_speedup)
