"""A GPU as the models see it: SM limits, product figures, SM count; and how to find one.

``lookup("sm_90")``, ``lookup("9.0")``, ``lookup("H100 SXM")``, ``lookup("NVIDIA H200")``;
``spec_from_device_properties(trace.devices[0])`` for a Kineto ``deviceProperties`` entry;
The GPU of this machine is read by ``aiprof.measure.device.live_device`` (torch or NVML).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from aiprof.errors import InputError, UnsupportedDeviceError
from aiprof.hardware.arch import TEXTBOOK_SM, ArchLimits
from aiprof.hardware.arch_table import ARCHES
from aiprof.hardware.products import PRODUCTS, ProductSpec

_DTYPES = {
    "fp64": "fp64", "float64": "fp64", "double": "fp64",
    "fp32": "fp32", "float32": "fp32", "float": "fp32",
    "tf32": "tf32",
    "fp16": "fp16", "float16": "fp16", "half": "fp16",
    "bf16": "bf16", "bfloat16": "bf16",
    "fp8": "fp8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "e4m3": "fp8", "e5m2": "fp8",
    "int8": "int8", "qint8": "int8",
}


def normalize_dtype(dtype: str) -> str:
    """Map ``torch.bfloat16``, ``"half"``, ``"float32"``... to fp64/fp32/tf32/fp16/bf16/fp8/int8."""
    key = str(dtype).lower().removeprefix("torch.")
    if key not in _DTYPES:
        raise InputError(f"unknown dtype {dtype!r}: use one of {', '.join(sorted(set(_DTYPES)))}")
    return _DTYPES[key]


@dataclass(frozen=True, kw_only=True)
class GpuSpec:
    """Everything aiprof knows about one GPU (or one architecture, when ``product`` is None)."""

    name: str
    """Display name (product, ``deviceProperties.name`` or ``sm_XY``)."""
    vendor: str = "nvidia"
    """``nvidia`` or ``amd``."""
    arch: ArchLimits | None = None
    """SM limits for the occupancy model (None: not modelled, e.g. AMD)."""
    product: ProductSpec | None = None
    """Datasheet figures (None: only the architecture is known)."""
    num_sms: int | None = None
    """SM (or AMD compute-unit) count."""

    @property
    def occupancy_supported(self) -> bool:
        """Whether the NVIDIA occupancy model applies to this device."""
        return self.vendor == "nvidia" and self.arch is not None

    @property
    def mem_bandwidth_bytes_per_s(self) -> float:
        """Datasheet DRAM bandwidth; raises ``UnsupportedDeviceError`` when unknown."""
        return self._product("memory bandwidth").mem_bandwidth_bytes_per_s

    def has_peak(self, dtype: str, *, tensor_cores: bool = True) -> bool:
        """Whether ``peak_flops(dtype)`` has a value for this device."""
        if self.product is None:
            return False
        return _peak_key(self.product, normalize_dtype(dtype), tensor_cores) is not None

    def peak_flops(self, dtype: str, *, tensor_cores: bool = True) -> float:
        """Dense peak FLOP/s (OP/s for int8) for ``dtype``.

        fp16/bf16/tf32/fp8/int8 use tensor cores; fp64 uses the FP64 tensor path where one exists
        (``tensor_cores=False`` gives the CUDA-core rate); fp32 is always the CUDA-core rate.
        """
        product = self._product(f"peak {dtype} FLOP/s")
        kind = normalize_dtype(dtype)
        key = _peak_key(product, kind, tensor_cores)
        if key is None:
            raise UnsupportedDeviceError(
                f"{product.name} has no published {kind} peak; pick another dtype or pass a spec")
        return product.peak_flops[key]

    def _product(self, what: str) -> ProductSpec:
        if self.product is None:
            raise UnsupportedDeviceError(
                f"{what} is unknown for {self.name!r}: name a product (e.g. 'H100 SXM') instead "
                "of only an architecture")
        return self.product


def _peak_key(product: ProductSpec, kind: str, tensor_cores: bool) -> str | None:
    candidates = {
        "fp64": ["fp64_tensor", "fp64"] if tensor_cores else ["fp64"],
        "fp16": ["fp16"] if tensor_cores else ["fp16_vector"],
        "bf16": ["bf16"] if tensor_cores else ["bf16_vector"],
    }.get(kind, [kind])
    return next((key for key in candidates if key in product.peak_flops), None)


_CC_RE = re.compile(r"^(?:sm_?|compute_)?(\d{1,2})\.?(\d)$")


def _parse_cc(text: str) -> tuple[int, int] | None:
    match = _CC_RE.match(text.strip().lower())
    return (int(match.group(1)), int(match.group(2))) if match else None


def arch_for(cc: tuple[int, int]) -> ArchLimits:
    """The SM limits of compute capability ``cc``; ``UnsupportedDeviceError`` if unknown."""
    if cc not in ARCHES:
        known = ", ".join(a.name for a in ARCHES.values())
        raise UnsupportedDeviceError(f"unknown architecture sm_{cc[0]}{cc[1]}: known are {known}")
    return ARCHES[cc]


def find_product(name: str) -> ProductSpec | None:
    """The product whose longest alias occurs in ``name`` as a whole word, or None."""
    text = name.lower().replace("_", " ")
    best: tuple[int, ProductSpec] | None = None
    for product in PRODUCTS:
        for alias in product.aliases:
            if re.search(rf"(?<![a-z0-9]){re.escape(alias)}(?![a-z0-9])", text):
                if best is None or len(alias) > best[0]:
                    best = (len(alias), product)
    return best[1] if best else None


def lookup(name_or_cc: str | GpuSpec | ArchLimits) -> GpuSpec:
    """A ``GpuSpec`` from ``"sm_90"``, ``"9.0"``, a product or ``deviceProperties`` name,
    ``"textbook"`` (the chapter's idealized SM), or a spec.

    Raises ``UnsupportedDeviceError`` when nothing matches.
    """
    if isinstance(name_or_cc, GpuSpec):
        return name_or_cc
    if isinstance(name_or_cc, ArchLimits):
        return GpuSpec(name=name_or_cc.name, arch=name_or_cc)
    if name_or_cc.strip().lower() == TEXTBOOK_SM.name:
        return GpuSpec(name=TEXTBOOK_SM.name, arch=TEXTBOOK_SM)
    cc = _parse_cc(name_or_cc)
    if cc is not None:
        arch = arch_for(cc)
        return GpuSpec(name=arch.name, arch=arch)
    product = find_product(name_or_cc)
    if product is None:
        names = ", ".join(p.name for p in PRODUCTS)
        raise UnsupportedDeviceError(
            f"unknown GPU {name_or_cc!r}: use sm_XY, X.Y or one of: {names}")
    return GpuSpec(name=product.name, arch=arch_for(product.cc), product=product,
                   num_sms=product.num_sms)


_PROP_FIELDS = {  # deviceProperties key -> ArchLimits field (device values override the table)
    "maxThreadsPerBlock": "max_threads_per_block",
    "maxThreadsPerMultiprocessor": "max_threads_per_sm",
    "regsPerBlock": "max_regs_per_block",
    "regsPerMultiprocessor": "regs_per_sm",
    "sharedMemPerBlock": "smem_per_block_bytes",
    "sharedMemPerMultiprocessor": "smem_per_sm_bytes",
    "sharedMemPerBlockOptin": "smem_per_block_optin_bytes",
}


def _is_amd(props: dict[str, Any]) -> bool:
    name = str(props.get("name", "")).lower()
    amd_words = ("amd", "radeon", "instinct", "mi2", "mi3", "gfx")
    return (int(props.get("warpSize", 32)) != 32 or "maxSharedMemoryPerMultiProcessor" in props
            or any(w in name for w in amd_words))


def spec_from_device_properties(props: dict[str, Any]) -> GpuSpec:
    """A ``GpuSpec`` from one Kineto ``deviceProperties`` entry.

    AMD devices (warp size 64; ROCm reports gfx90a as computeMajor 9) are not mistaken for
    Hopper: they get ``vendor="amd"`` and no occupancy model.
    """
    name = str(props.get("name", "unknown GPU"))
    num_sms = int(props["numSms"]) if "numSms" in props else None
    if _is_amd(props):
        return GpuSpec(name=name, vendor="amd", num_sms=num_sms)
    try:
        cc = (int(props["computeMajor"]), int(props["computeMinor"]))
    except (KeyError, TypeError, ValueError) as error:
        raise InputError(f"deviceProperties of {name!r} lack computeMajor/computeMinor") from error
    overrides: dict[str, Any] = {f: int(props[k]) for k, f in _PROP_FIELDS.items()
                                 if int(props.get(k, 0)) > 0}
    arch = replace(arch_for(cc), **overrides)
    product = find_product(name)
    if product is not None and product.cc != cc:
        product = None
    return GpuSpec(name=name, arch=arch, product=product,
                   num_sms=num_sms or (product.num_sms if product else None))
