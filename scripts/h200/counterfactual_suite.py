"""The counterfactual suite of issue 15: 26 workloads, every fix a finding could propose
measured on each, and traces of each planted base.

    OUT=dir PYTHONPATH=src python3 scripts/h200/counterfactual_suite.py --part 1
    OUT=dir PYTHONPATH=src python3 scripts/h200/counterfactual_suite.py --part 2
    OUT=dir PYTHONPATH=src python3 scripts/h200/counterfactual_suite.py --smoke   # CPU, tiny
    OUT=dir PYTHONPATH=src python3 scripts/h200/counterfactual_suite.py --tag extra W1 W2
    OUT=dir PYTHONPATH=src python3 scripts/h200/counterfactual_suite.py --tag compile \
        --only compile --compile-host-waiting --no-traces W1 W2   # one fix, no traces

Each part stays under 9 minutes on one H200: it stops starting new workloads after
``--budget-s`` seconds (default 390) and stops compiling after ``--compile-budget-s`` seconds
of compilation (default 100; workloads whose compile is skipped say so). Writes, under
``$OUT/counterfactual/``, ``labels-<part>.json`` (rewritten after every workload),
``traces-<part>.tar`` (each base's ``aiprof.profile`` record ``<w>.aiprof/``, two recorded
steps) and ``plain-<part>.tar`` (its plain torch.profiler trace ``<w>.torch.trace.json.gz``,
one step), record_shapes on.
Protocol: ``counterfactual/protocol.py``; workloads and their planted causes:
``counterfactual/{hf,vision,custom}.py``; fixes and the category each is the truth for:
``counterfactual/knobs.py``. Needs torch, transformers and torchvision; no download (models
are built from configs with random weights). Errors are reported per workload or per fix and
never stop the others.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import statistics
import sys
import tarfile
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from counterfactual import calls, custom, hf, large, protocol, vision  # noqa: E402
from counterfactual.knobs import FIXES, Fix, Step, turned  # noqa: E402
from counterfactual.workload import Workload  # noqa: E402

WORKLOADS: list[Workload] = hf.WORKLOADS + vision.WORKLOADS + custom.WORKLOADS
PARTS = {
    # Each part starts with the workloads whose torch.compile is most worth its 20-60 s (the
    # compile budget is spent first come, first served), then the rest.
    "1": ["gpt2_vocab_bf16_train", "vit_small_fp32_train", "llama_fp32_empty_cache_train",
          "llama_tiny_b2_infer", "bert_small_fp32_train", "roberta_eager_bf16_infer",
          "distilbert_sync_train", "vit_tiny_loader_infer", "gpt2_host_tokenize_infer",
          "resnet34_nchw_bf16_train", "resnet18_loader_fp32_train",
          "mobilenet_v3_small_b8_infer", "efficientnet_b0_pageable_nchw_train"],
    "2": ["hand_attention_bf16_train", "unet_bn_nchw_empty_cache_train",
          "fcn_resnet50_fp32_infer", "mlp_wide_fp32_train", "resnet50_pageable_bf16_infer",
          "mlp_deep_b32_infer", "conv_misaligned_bf16_infer", "deeplabv3_mnv3_mask_train",
          "resnet18_b4_train", "rl_policy_rollout", "rl_policy_item_sync",
          "blocking_copy_mlp_train", "seq_host_augment_pageable_train"],
}
assert sorted(PARTS["1"] + PARTS["2"]) == sorted(w.name for w in WORKLOADS)
CASE_TIMEOUT_S = 150
"""A workload still running after this long is abandoned (a hung loader must not eat the
part's 9 minutes)."""
COMPILE_MIN_LEFT_S = 120.0
"""No compile starts with less than this left of the part's budget."""


@dataclass(frozen=True)
class Choice:
    """Which fixes this run measures, and whether it records the bases' traces."""

    only: frozenset[str]
    """Fixes to measure; empty: every applicable one."""
    host_waiting: bool
    """Measure compile also on steps that wait on host-side work."""
    traces: bool
    timed_s: float = 0.0
    """More rounds, up to ``max_rounds``, until a workload's rounds took this long."""
    max_rounds: int = 0


class Budget:
    """Wall-clock budgets of one part: starting workloads, and compiling."""

    def __init__(self, total_s: float, compile_s: float) -> None:
        self.began, self.total_s, self.compile_s = time.monotonic(), total_s, compile_s
        self.compiled_s = 0.0

    def left_s(self) -> float:
        return self.total_s - (time.monotonic() - self.began)

    def spent(self) -> bool:
        return self.left_s() < 0


def skip_reason(fix: Fix, w: Workload, device: str, smoke: bool, budget: Budget,
                only: frozenset[str] = frozenset(), host_waiting: bool = False) -> str:
    """Why an applicable fix is not measured in this run (empty: it is measured)."""
    if only and fix.name not in only:
        return f"not measured: this run measured only {', '.join(sorted(only))}"
    if fix.name == "cuda_graph":
        if w.not_capturable and not w.capturable_after:
            return f"not capturable: {w.not_capturable}"
        if w.capturable_after and only and w.capturable_after not in only:
            return (f"not measured: graphs are measured after {w.capturable_after}, which this "
                    "run did not measure")
        if device != "cuda":
            return "no CUDA device: CUDA graphs are not measured"
    if fix.name == "compile":
        if smoke:
            return "smoke run: compile not measured"
        if not w.compile_ok and not host_waiting:
            return ("not measured: the step waits on host-side work, where compile changes "
                    "nothing; its budget went to other workloads")
        if budget.compiled_s > budget.compile_s or budget.left_s() < COMPILE_MIN_LEFT_S:
            return f"not measured: the part's compile budget ({budget.compile_s:.0f} s) is spent"
    return ""


def summarise(name: str, rounds_ms: list[float], base_rounds_ms: list[float]) -> dict[str, Any]:
    base, fixed = statistics.median(base_rounds_ms), statistics.median(rounds_ms)
    per_round = [100.0 * (1.0 - f / b) for f, b in zip(rounds_ms, base_rounds_ms, strict=True)]
    return {"base_ms": round(base, 4), "fixed_ms": round(fixed, 4),
            "gain_pct": round(100.0 * (1.0 - fixed / base), 2), "rounds": len(rounds_ms),
            "fixed_rounds_ms": [round(t, 4) for t in rounds_ms],
            "round_gain_pct": [round(g, 2) for g in per_round],
            "spread_pct": [round(min(per_round), 2), round(max(per_round), 2)]}


def summarise_after(rounds_ms: list[float], reference_rounds_ms: list[float],
                    base_rounds_ms: list[float], after: str) -> dict[str, Any]:
    """A fix measured on another fix's variant (graphs once ``after`` is applied), in points of
    the planted step: (that variant's step - it with the fix) / the planted step."""
    base = statistics.median(base_rounds_ms)
    reference, fixed = statistics.median(reference_rounds_ms), statistics.median(rounds_ms)
    per_round = [100.0 * (r - f) / b
                 for f, r, b in zip(rounds_ms, reference_rounds_ms, base_rounds_ms, strict=True)]
    return {"after_fixing": after, "base_ms": round(base, 4),
            "reference_ms": round(reference, 4), "fixed_ms": round(fixed, 4),
            "gain_pct": round(100.0 * (reference - fixed) / base, 2),
            "gain_of": f"points of the planted step: ({after} - {after} graphed) / planted",
            "rounds": len(rounds_ms), "fixed_rounds_ms": [round(t, 4) for t in rounds_ms],
            "reference_rounds_ms": [round(t, 4) for t in reference_rounds_ms],
            "round_gain_pct": [round(g, 2) for g in per_round],
            "spread_pct": [round(min(per_round), 2), round(max(per_round), 2)]}


def build_fixes(w: Workload, device: str, smoke: bool, budget: Budget, choice: Choice
                ) -> tuple[dict[str, tuple[Step, int]], dict[str, dict[str, Any]]]:
    """Every fix's variant (warmed up) and the rows of those not measured."""
    variants: dict[str, tuple[Step, int]] = {}
    rows: dict[str, dict[str, Any]] = {}
    for fix in FIXES:
        row: dict[str, Any] = {"name": fix.name, "category": fix.category}
        rows[fix.name] = row
        if reason := w.applicability(fix):
            row.update(applicable=False, reason=reason, gain_pct=0.0)
            continue
        row["applicable"] = True
        if reason := skip_reason(fix, w, device, smoke, budget, choice.only,
                                 choice.host_waiting):
            row.update(skipped=reason, gain_pct=None)
            continue
        knobs = w.graph_knobs() if fix.name == "cuda_graph" else turned(w.base, fix)
        try:
            began = time.monotonic()
            step = protocol.build_variant(w.build, knobs, device, smoke)
            row["first_steps_s"] = round(protocol.warm(step, 3, device), 2)
            if fix.name == "compile":
                budget.compiled_s += time.monotonic() - began
            variants[fix.name] = (step, w.warmup(knobs))
        except Exception as error:  # one fix failing never stops the others
            traceback.print_exc()
            row.update(skipped=f"error: {error!r}"[:400], gain_pct=None)
            protocol.sync(device)
    return variants, rows


def run_workload(w: Workload, device: str, smoke: bool, budget: Budget, traces: Path,
                 rounds: int, measure: int, choice: Choice) -> dict[str, Any]:
    torch.manual_seed(0)
    base = protocol.build_variant(w.build, w.base, device, smoke)
    protocol.warm(base, 3, device)
    fixes, rows = build_fixes(w, device, smoke, budget, choice)
    variants = {"base": (base, w.warmup(w.base)), **fixes}
    times = protocol.interleaved(variants, rounds, measure, device, mean=w.alternates,
                                 timed_s=choice.timed_s, max_rounds=choice.max_rounds)
    for name in fixes:
        if name == "cuda_graph" and w.capturable_after:
            after = w.capturable_after
            if after not in times:  # the variant it is measured on failed to build
                rows[name].update(skipped=f"not measured: the {after} variant failed",
                                  gain_pct=None)
                continue
            rows[name].update(summarise_after(times[name], times[after], times["base"], after))
        else:
            rows[name].update(summarise(name, times[name], times["base"]))
    capture_ms: list[float] = []
    capture_error = "not recorded: --no-traces"
    if choice.traces:
        protocol.torch_trace(base, w.warmup(w.base),
                             traces / f"{w.name}.torch.trace.json.gz", device)
        try:  # a failed capture keeps the measured fixes
            capture_ms = protocol.aiprof_record(base, w.warmup(w.base),
                                                traces / f"{w.name}.aiprof", w.name, device)
            capture_error = ""
        except Exception as error:
            traceback.print_exc()
            capture_error = f"{error!r}"[:400]
    return {
        "workload": w.name, "kind": w.kind, "mode": w.mode, "description": w.description,
        "causes": list(w.causes),
        "cause_categories": sorted({f.category for f in FIXES if f.name in w.causes}),
        "base_knobs": {k: v for k, v in vars(w.base).items()},
        "metric": f"{'mean' if w.alternates else 'median'} of {measure} steps per block",
        "base_ms": round(statistics.median(times["base"]), 4),
        "base_rounds_ms": [round(t, 4) for t in times["base"]],
        "capture_unprofiled_step_ms": [round(t, 4) for t in capture_ms],
        "capture_error": capture_error,
        "traces": ({"torch": f"{w.name}.torch.trace.json.gz", "aiprof": f"{w.name}.aiprof"}
                   if choice.traces else {}),
        "fixes": list(rows.values()),
    }


def versions() -> dict[str, str]:
    import transformers

    out = {"torch": torch.__version__, "transformers": transformers.__version__}
    try:
        import torchvision

        out["torchvision"] = torchvision.__version__
    except ImportError:
        out["torchvision"] = "absent"
    return out


def aiprof_capture_error() -> str:
    """Why ``aiprof.profile`` cannot run here (a dependency of aiprof missing), or ""."""
    try:
        import aiprof.capture.api  # noqa: F401
        import aiprof.capture.session  # noqa: F401
    except ImportError as error:
        return f"{error!r}"
    return ""


def on_alarm(signum: int, frame: object) -> None:
    raise TimeoutError("workload still running after its --case-timeout-s")


def pack(traces: Path, out: Path, tag: str) -> None:
    """The aiprof records into ``traces-<tag>.tar`` and the plain traces into
    ``plain-<tag>.tar``: two files, so that each stays well under 16 MiB."""
    for name, keep in ((f"traces-{tag}.tar", lambda p: p.is_dir()),
                       (f"plain-{tag}.tar", lambda p: p.is_file())):
        partial = out / f"{name}.partial"
        with tarfile.open(partial, "w") as tar:
            for item in sorted(traces.iterdir()):
                if keep(item):
                    tar.add(item, arcname=item.name)
        partial.replace(out / name)


def chosen(args: argparse.Namespace) -> list[Workload]:
    if args.cases:  # the held-out steps (several calls of the model, large ones): by name only
        by_name = {w.name: w for w in WORKLOADS + calls.WORKLOADS + large.WORKLOADS
                   + large.LATER}
        unknown = [c for c in args.cases if c not in by_name]
        if unknown:
            raise SystemExit(f"unknown workloads {unknown}; known: {sorted(by_name)}")
        return [by_name[c] for c in args.cases]
    if args.smoke:
        kinds: dict[str, int] = {}
        picked = []
        for w in WORKLOADS:
            if kinds.get(w.kind, 0) < 2:
                kinds[w.kind] = kinds.get(w.kind, 0) + 1
                picked.append(w)
        return picked
    by_name = {w.name: w for w in WORKLOADS}
    names = PARTS["1"] + PARTS["2"] if args.part == "all" else PARTS[args.part]
    return [by_name[n] for n in names]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["1", "2", "all"], default="all")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes, 2 workloads per kind, no CUDA graph or compile")
    parser.add_argument("--budget-s", type=float, default=390.0)
    parser.add_argument("--compile-budget-s", type=float, default=100.0)
    parser.add_argument("--rounds", type=int, default=None,
                        help=f"interleaved rounds per workload (default {protocol.ROUNDS})")
    parser.add_argument("--timed-s", type=float, default=protocol.TIMED_S,
                        help="more rounds, up to --max-rounds, until a workload's rounds took "
                        f"this long (default {protocol.TIMED_S}; 0: exactly --rounds)")
    parser.add_argument("--max-rounds", type=int, default=protocol.MAX_ROUNDS)
    parser.add_argument("--tag", help="output names' suffix (default: part1, part2, all or "
                        "smoke; give one when re-running named workloads, not to overwrite)")
    parser.add_argument("--only", default="",
                        help="comma-separated fixes to measure (default: every applicable one)")
    parser.add_argument("--compile-host-waiting", action="store_true",
                        help="measure compile also where the step waits on host-side work")
    parser.add_argument("--case-timeout-s", type=int, default=CASE_TIMEOUT_S,
                        help="abandon a workload still running after this long (default "
                        f"{CASE_TIMEOUT_S}; large steps with compile need more)")
    parser.add_argument("--no-traces", action="store_true",
                        help="measure the fixes only; record no trace of the base")
    parser.add_argument("cases", nargs="*", help="workloads to run (default: the part's)")
    args = parser.parse_args(argv)
    only = frozenset(n for n in args.only.split(",") if n)
    if unknown := sorted(only - {f.name for f in FIXES}):
        raise SystemExit(f"unknown fixes {unknown}; known: {sorted(f.name for f in FIXES)}")
    choice = Choice(only, args.compile_host_waiting, not args.no_traces,
                    0.0 if args.smoke else args.timed_s, args.max_rounds)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.smoke:  # on a shared CPU, intra-op threads oversubscribe it (20x slower steps)
        torch.set_num_threads(1)
    if device == "cpu" and not args.smoke:
        print("counterfactual: no CUDA device; run with --smoke for the CPU check")
        return 0
    out = Path(os.environ.get("OUT", "out")) / "counterfactual"
    out.mkdir(parents=True, exist_ok=True)
    tag = args.tag or (f"part{args.part}" if args.part != "all"
                       else ("smoke" if args.smoke else "all"))
    rounds, measure = (2, 3) if args.smoke else (args.rounds or protocol.ROUNDS, protocol.MEASURE)
    # A smoke run checks that every code path runs; on a shared CPU it takes what it takes.
    budget = Budget(float("inf") if args.smoke else args.budget_s, args.compile_budget_s)
    labels: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        **versions(), "part": args.part, "smoke": args.smoke,
        "recorded_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "method": protocol.__doc__.strip().replace("\n", " "),
        "only": sorted(only), "compile_host_waiting": choice.host_waiting,
        "rounds_policy": {"min": rounds, "max": max(rounds, choice.max_rounds),
                          "until_s": choice.timed_s},
        "fix_categories": {f.name: f.category for f in FIXES},
        "workloads": [],
    }
    if missing := aiprof_capture_error():
        labels["aiprof_import_error"] = missing
        print(f"counterfactual: aiprof.profile cannot run ({missing}): the fixes are measured "
              "and plain traces kept, but no aiprof record is written; install aiprof's "
              "dependencies (pyproject.toml) to get them", flush=True)
    signal.signal(signal.SIGALRM, on_alarm)
    with tempfile.TemporaryDirectory() as tmp:
        traces = Path(tmp)
        for w in chosen(args):
            if budget.spent():
                labels["workloads"].append({"workload": w.name, "error": "skipped: time budget"})
                continue
            started = time.monotonic()
            signal.alarm(args.case_timeout_s * (10 if args.smoke else 1))
            try:
                row = run_workload(w, device, args.smoke, budget, traces, rounds, measure,
                                   choice)
            except Exception as error:  # report, never crash the part
                traceback.print_exc()
                row = {"workload": w.name, "error": repr(error)[:500]}
            finally:
                signal.alarm(0)
            row["wall_s"] = round(time.monotonic() - started, 1)
            labels["workloads"].append(row)
            (out / f"labels-{tag}.json").write_text(json.dumps(labels, indent=1))
            if choice.traces:
                pack(traces, out, tag)
            gains = {f["name"]: f.get("gain_pct") for f in row.get("fixes", [])
                     if f.get("applicable") and "skipped" not in f}
            print(f"counterfactual: {w.name} {row['wall_s']} s base {row.get('base_ms')} ms "
                  f"gains {gains} {row.get('error', '')}", flush=True)
            torch._dynamo.reset()  # compiled code of this workload's models, and their memory
            gc.collect()
            if device == "cuda":
                torch.cuda.empty_cache()
        (out / f"labels-{tag}.json").write_text(json.dumps(labels, indent=1))  # with skips
    print(f"counterfactual: {len(labels['workloads'])} workloads in "
          f"{time.monotonic() - budget.began:.0f} s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
