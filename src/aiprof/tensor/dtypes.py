"""Element sizes of the dtype names that PyTorch writes into traces and that torch reports."""

from __future__ import annotations

from aiprof.errors import InputError

# Canonical name -> bytes per element. Sizes are those of the C types behind
# c10::ScalarType (c10/core/ScalarType.h in the PyTorch source).
_ELEMENT_BYTES: dict[str, int] = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "complex64": 8,
    "complex128": 16,
}

# Spellings seen in Kineto traces (record_shapes "Input type") and in str(torch.dtype).
_ALIASES: dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "c10::half": "float16",
    "c10::bfloat16": "bfloat16",
    "c10::float8_e4m3fn": "float8_e4m3fn",
    "c10::float8_e5m2": "float8_e5m2",
    "c10::float8_e4m3fnuz": "float8_e4m3fnuz",
    "c10::float8_e5m2fnuz": "float8_e5m2fnuz",
    "long int": "int64",
    "long": "int64",
    "int": "int32",
    "short int": "int16",
    "short": "int16",
    "signed char": "int8",
    "unsigned char": "uint8",
    "c10::complex<float>": "complex64",
    "c10::complex<double>": "complex128",
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp64": "float64",
    "fp8": "float8_e4m3fn",
}


def canonical_dtype(name: str) -> str | None:
    """The canonical dtype name (``float32``, ``bfloat16``...) of ``name``, or None if unknown."""
    key = name.strip().lower().removeprefix("torch.")
    key = _ALIASES.get(key, key)
    return key if key in _ELEMENT_BYTES else None


def is_dtype_name(name: str) -> bool:
    """Whether ``name`` spells a tensor element type (as opposed to "Scalar", "ScalarList"...)."""
    return canonical_dtype(name) is not None


def element_bytes(name: str) -> int:
    """Bytes per element of dtype ``name``; raises InputError for a name that is not a dtype."""
    canonical = canonical_dtype(name)
    if canonical is None:
        raise InputError(
            f"unknown dtype {name!r}: use a torch dtype name such as float32 or bfloat16"
        )
    return _ELEMENT_BYTES[canonical]


def precision_class(name: str) -> str:
    """The roofline precision of a dtype: fp64, fp32, fp16, bf16, fp8 or int8 ("other" if none)."""
    canonical = canonical_dtype(name) or ""
    if canonical.startswith("float8"):
        return "fp8"
    return {
        "float64": "fp64",
        "float32": "fp32",
        "float16": "fp16",
        "bfloat16": "bf16",
        "int8": "int8",
        "uint8": "int8",
    }.get(canonical, "other")
