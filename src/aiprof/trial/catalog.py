"""The fixes ``aiprof try`` can apply from outside the script, and the ones it cannot.

This module is torch-free: the parent process (which only schedules and compares) reads it;
the mechanisms themselves live in ``aiprof.measure.fixes``, one module per fix.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiprof.errors import InputError


@dataclass(frozen=True)
class FixInfo:
    """One fix: its name on the command line, what it does, which findings it answers."""

    name: str
    summary: str
    categories: tuple[str, ...]
    """Diagnosis categories (DESIGN.md vocabulary) whose findings this fix addresses."""


FIXES: tuple[FixInfo, ...] = (
    FixInfo("tf32", "TF32 matmul and cuDNN flags", ("tensor_cores_unused",)),
    FixInfo("bf16", "autocast to bf16 around the steps (numerics change)",
            ("tensor_cores_unused",)),
    FixInfo("cudnn_benchmark", "torch.backends.cudnn.benchmark = True", ()),
    FixInfo("channels_last", "conv weights and inputs in channels_last", ("layout_conversion",)),
    FixInfo("dataloader", "DataLoader workers, pin_memory, persistent workers, prefetch",
            ("dataloader",)),
    FixInfo("fused_optimizer", "Adam/AdamW/SGD with fused=True", ("cpu_bound",)),
    FixInfo("no_empty_cache", "torch.cuda.empty_cache() made a no-op", ("allocator_churn",)),
    FixInfo("expandable_segments", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            ("allocator_churn",)),
    FixInfo("compile", "torch.compile of the optimizer's model (compile time excluded)",
            ("unfused_elementwise", "cpu_bound")),
)
BY_NAME = {fix.name: fix for fix in FIXES}

CODE_CHANGES: dict[str, str] = {
    "host_sync": "remove the .item()/.cpu()/synchronize calls inside the step",
    "h2d_transfer": "pin host buffers and copy with non_blocking=True, or move data earlier",
    "misaligned_shapes": "pad GEMM/conv dimensions to multiples of 8 (bf16/fp16) or 16",
    "communication_exposed": "overlap collectives with compute (bucket sizes, prefetch)",
    "straggler": "balance the slow rank's work or fix its host",
    "low_occupancy": "larger batches or fused kernels; CUDA graphs of the whole step",
}
"""Categories whose fix needs a change to the code: ``aiprof try`` names them and does not
apply anything (``cpu_bound``'s CUDA graphs of a whole step are also such a change)."""


def parse_fix_list(text: str) -> tuple[str, ...]:
    """``"tf32,bf16"`` -> ``("tf32", "bf16")``; an unknown name is an ``InputError``."""
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not names:
        raise InputError("--fix needs at least one name, e.g. --fix tf32,bf16")
    unknown = [name for name in names if name not in BY_NAME]
    if unknown:
        raise InputError(f"unknown fix {unknown[0]!r}; known: {', '.join(BY_NAME)}")
    return names


def fixes_for_categories(categories: list[str]) -> tuple[str, ...]:
    """The fixes (in catalog order) that answer any of ``categories``."""
    wanted = set(categories)
    return tuple(fix.name for fix in FIXES if wanted.intersection(fix.categories))


def estimated_gains(findings: list[tuple[str, float]]) -> dict[str, float]:
    """Per fix, the largest estimated gain (%) of the findings it answers.

    ``findings`` are ``(category, estimated_gain_pct)`` pairs from a diagnosis.
    """
    gains: dict[str, float] = {}
    for category, gain in findings:
        for fix in FIXES:
            if category in fix.categories:
                gains[fix.name] = max(gains.get(fix.name, 0.0), float(gain))
    return gains
