"""``aiprof occupancy``: theoretical occupancy of a launch, and what-if sweeps."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING

from aiprof.cli._command import Command
from aiprof.errors import InputError

if TYPE_CHECKING:
    from aiprof.gpu.occupancy_sweep import OccupancySweep
    from aiprof.hardware.arch import ArchLimits

_ARCH_OVERRIDES = (("--sm-threads", "max_threads_per_sm"), ("--sm-blocks", "max_blocks_per_sm"),
                   ("--sm-registers", "regs_per_sm"), ("--sm-shared-mem", "smem_per_sm_bytes"),
                   ("--reserved-shared-mem", "reserved_smem_per_block_bytes"))


def parse_bytes(text: str) -> int:
    """``8192``, ``8K``, ``8KiB`` -> bytes, for argparse (``distributed.sizes.parse_bytes``)."""
    from aiprof.distributed.sizes import parse_bytes as parse

    try:
        return parse(text)
    except InputError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arch", default=None,
                        help="sm_90, 9.0, a product (H100 SXM), or 'textbook' for an idealized "
                             "SM (2048 threads, 16 blocks, 64K registers, 48 KB shared memory); "
                             "default: this machine's GPU")
    parser.add_argument("--block-size", type=int, required=True, help="threads per block")
    parser.add_argument("--registers", type=int, default=32, help="registers per thread")
    parser.add_argument("--shared-mem", type=parse_bytes, default=0,
                        help="static + dynamic shared memory per block (bytes, or 8K)")
    parser.add_argument("--carveout", type=int, default=None,
                        help="preferred shared-memory carveout %% (0-100; default: driver default)")
    parser.add_argument("--no-opt-in", action="store_true",
                        help="the kernel did not opt in to more than 48 KB of shared memory")
    for flag, _ in _ARCH_OVERRIDES:
        parser.add_argument(flag, type=parse_bytes, default=None,
                            help="override this SM limit (a user-defined SM)")
    parser.add_argument("--sweep", choices=("block-size", "registers", "shared-mem"),
                        help="vary one parameter and print occupancy for each value")
    parser.add_argument("--plot", metavar="FILE.svg", help="with --sweep: write an SVG graph")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _arch(args: argparse.Namespace) -> ArchLimits:
    from aiprof.hardware import lookup
    from aiprof.measure.device import live_device

    spec = live_device() if args.arch is None else lookup(args.arch)
    if spec.arch is None or not spec.occupancy_supported:
        from aiprof.errors import UnsupportedDeviceError

        raise UnsupportedDeviceError(f"occupancy is not modelled for {spec.name}")
    overrides = {field: getattr(args, flag[2:].replace("-", "_"))
                 for flag, field in _ARCH_OVERRIDES}
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if any(v <= 0 for k, v in overrides.items() if k != "reserved_smem_per_block_bytes"):
        raise InputError("SM limits must be > 0")
    if not overrides:
        return spec.arch
    if "smem_per_sm_bytes" in overrides:  # a custom SM size: one fixed configuration
        reserve = overrides.get("reserved_smem_per_block_bytes",
                                spec.arch.reserved_smem_per_block_bytes)
        overrides["smem_configs_kib"] = ()
        overrides["smem_per_block_optin_bytes"] = min(spec.arch.smem_per_block_optin_bytes,
                                                      overrides["smem_per_sm_bytes"] - reserve)
    return replace(spec.arch, name=f"{spec.arch.name}+custom", **overrides)


def _plot(result: OccupancySweep, path: str) -> None:
    from pathlib import Path

    from aiprof.report.svg import Series, line_chart

    series = [Series("occupancy %", result.values, [100 * p.occupancy for p in result.points],
                     kind="step"),
              Series("current", [result.values[0], result.values[-1]],
                     [100 * result.base.occupancy] * 2)]
    svg = line_chart(series, title=f"Occupancy vs {result.parameter} ({result.base.arch})",
                     x_label=result.parameter, y_label="theoretical occupancy (%)")
    Path(path).write_text(svg)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from aiprof.gpu.occupancy import occupancy
    from aiprof.gpu.occupancy_sweep import best_block_size, sweep
    from aiprof.jsontext import dumps
    from aiprof.report.occupancy_terminal import render_occupancy, render_occupancy_sweep

    arch = _arch(args)
    base = dict(block_size=args.block_size, registers_per_thread=args.registers,
                shared_mem_per_block=args.shared_mem)
    if args.plot and not args.sweep:
        raise InputError("--plot needs --sweep block-size|registers|shared-mem")
    if args.sweep:
        result = sweep(arch, args.sweep, **base, carveout=args.carveout)
        if args.plot:
            _plot(result, args.plot)
        best = None if args.sweep != "block-size" else best_block_size(
            arch, registers_per_thread=args.registers, shared_mem_per_block=args.shared_mem,
            carveout=args.carveout)
        if args.json:
            print(dumps(result))
        else:
            render_occupancy_sweep(Console(), result, best)
        return 0
    one = occupancy(arch, **base, carveout=args.carveout, opt_in=not args.no_opt_in)
    if args.json:
        print(dumps(one))
    else:
        render_occupancy(Console(), one)
    return 0


COMMAND = Command(name="occupancy", help="theoretical occupancy of a kernel launch (exact CUDA "
                  "calculator) and what-if sweeps", add_arguments=add_arguments, run=run, order=30)
