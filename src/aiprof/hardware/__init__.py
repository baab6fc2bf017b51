"""GPU hardware as data: per-compute-capability SM limits and per-product datasheet figures."""

from aiprof.hardware.arch import TEXTBOOK_SM, ArchLimits
from aiprof.hardware.arch_table import ARCHES
from aiprof.hardware.products import PRODUCTS, ProductSpec
from aiprof.hardware.spec import (
    GpuSpec,
    arch_for,
    find_product,
    lookup,
    normalize_dtype,
    spec_from_device_properties,
)

__all__ = [
    "ARCHES", "PRODUCTS", "TEXTBOOK_SM", "ArchLimits", "GpuSpec", "ProductSpec", "arch_for",
    "find_product", "lookup", "normalize_dtype", "spec_from_device_properties",
]
