"""``aiprof try`` against hand-edited twins on 8 unmodified user-style scripts (one H200).

    OUT=/some/dir PYTHONPATH=src python3 scripts/h200/try_suite.py            # the suite
    OUT=/some/dir PYTHONPATH=src python3 scripts/h200/try_suite.py --smoke    # CPU, tiny sizes
    ... try_suite.py mlp_train unet_train                                      # some scripts

For each script in ``scripts/h200/try_workloads/`` (transformers BERT/GPT-2/ViT from configs,
torchvision ResNet-50/ResNet-18/FCN segmentation, a custom MLP and UNet; training and
inference) it runs ONE ``aiprof try --json`` with the fixes that have a twin
(``try_workloads/twins/<script>__<fix>.py``: the same script with the fix written in) given as
``--fix`` and every twin given as ``--edited <fix>=<twin>``, so the fix applied from outside
and the hand-edited copy are measured with the same protocol in the same interleaved rounds
(fresh process each; base first, then last; CUDA-event step times). ``--mode auto`` gives
``--auto`` instead (every fix; about three times the processes: it does not fit the 9-minute
budget for all 8 scripts). Agreement per (script, fix): |aiprof gain - twin gain| <= max(10% of
|twin gain|, 2 points), the issue's acceptance rule.

Writes ``$OUT/try/suite.json`` (``suite-TAG.json`` with ``--tag``): the protocol, the
machine, per script its ``aiprof.try/1`` document and per fix both gains, intervals and the
agreement. Scripts that would not fit in ``--budget`` seconds (default 480) are listed as
skipped; a script's own ``aiprof try`` gets a share of the time left in proportion to its
variants (compile ones weigh 4) as its ``--budget`` (rounds that do not fit are left out and
the document says so). All 8 scripts at 3 rounds are about 140 processes: more than 480 s
on one H200, so run it in two parts, each well under 9 minutes:

    OUT=dir PYTHONPATH=src python3 scripts/h200/try_suite.py --tag a \
        mlp_train resnet50_train unet_train bert_train
    OUT=dir PYTHONPATH=src python3 scripts/h200/try_suite.py --tag b \
        segmentation_train resnet18_infer vit_infer gpt2_train

The try records (logs) go to a temporary directory.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WORKLOADS = HERE / "try_workloads"
TWINS = WORKLOADS / "twins"

SCRIPTS: dict[str, dict[str, Any]] = {
    # name: GPU args, smoke args, step detection, import needed; in priority order
    "mlp_train": {"args": [], "smoke": ["--batch", "16", "--width", "32", "--depth", "4"]},
    "resnet50_train": {"args": [], "smoke": ["--batch", "2", "--image", "32"],
                       "needs": "torchvision"},
    "unet_train": {"args": [], "smoke": ["--batch", "2", "--image", "32", "--width", "4"]},
    "bert_train": {"args": [], "needs": "transformers",
                   "smoke": ["--batch", "2", "--seq", "16", "--layers", "1", "--hidden", "64"]},
    "segmentation_train": {"args": [], "smoke": ["--batch", "1", "--image", "32"],
                           "needs": "torchvision"},
    "resnet18_infer": {"args": [], "smoke": ["--batch", "2", "--image", "32"],
                       "steps_from": "infer_batch", "needs": "torchvision"},
    "vit_infer": {"args": [], "needs": "transformers", "steps_from": "infer_batch",
                  "smoke": ["--batch", "2", "--image", "32", "--layers", "1"]},
    "gpt2_train": {"args": [], "needs": "transformers",
                   "smoke": ["--batch", "1", "--seq", "16", "--layers", "1", "--embd", "64"]},
}
AGREE_REL, AGREE_POINTS = 0.10, 2.0
"""The acceptance rule of the issue: within 10% relative or 2 points."""
MIN_SCRIPT_S = 45.0
"""A script is skipped when less than this is left of the budget."""
COMPILE_WEIGHT = 4
"""A compile variant costs about as much as this many others (20-60 s of compilation)."""


def weight(name: str, without: frozenset[str] = frozenset()) -> int:
    """The script's share of the budget: its variants (base, fixes, twins), compile heavier."""
    fixes = list(twins_of(name, without))
    return 1 + sum(2 * (COMPILE_WEIGHT if fix == "compile" else 1) for fix in fixes)


def twins_of(script: str, without: frozenset[str] = frozenset()) -> dict[str, Path]:
    """fix name -> twin path (fixes in ``without`` left out)."""
    twins = {path.stem.split("__", 1)[1]: path
             for path in sorted(TWINS.glob(f"{script}__*.py"))}
    return {fix: path for fix, path in twins.items() if fix not in without}


def agreement(aiprof_gain: float | None, twin_gain: float | None) -> dict[str, Any]:
    if aiprof_gain is None or twin_gain is None:
        return {"difference_points": None, "agree": None}
    difference = aiprof_gain - twin_gain
    bound = max(AGREE_REL * abs(twin_gain), AGREE_POINTS)
    return {"difference_points": round(difference, 2), "bound_points": round(bound, 2),
            "agree": abs(difference) <= bound}


def compare(document: dict[str, Any], fixes: list[str]) -> list[dict[str, Any]]:
    pairs = []
    for fix in fixes:
        outside = next((r for r in document["fixes"] if r["name"] == fix and not r["edited"]),
                       None)
        twin = next((r for r in document["fixes"] if r["name"] == f"{fix}_twin"), None)
        pairs.append({
            "fix": fix,
            "aiprof": _gain(outside), "twin": _gain(twin),
            **agreement(_gain(outside)["gain_pct"], _gain(twin)["gain_pct"]),
        })
    return pairs


def _gain(row: dict[str, Any] | None) -> dict[str, Any]:
    if row is None:
        return {"status": "absent", "gain_pct": None}
    return {"status": row["status"], "gain_pct": row["measured_gain_pct"],
            "interval_pct": row["interval_pct"], "round_gains_pct": row["round_gains_pct"],
            "verdict": row["verdict"], "median_step_us": row["median_step_us"],
            "step_time_us": row.get("step_time_us"),
            "peak_memory_bytes": row["peak_memory_bytes"], "reason": row["reason"],
            "compile_s": row["compile_s"], "numerics": row["numerics"]}


def _shown(path: Path) -> str:
    """The path relative to the working directory when it is inside it (the documents then
    name scripts as the repository does, not by one machine's folders)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def run_script(name: str, spec: dict[str, Any], args: argparse.Namespace, records: Path,
               budget_s: float) -> dict[str, Any]:
    twins = twins_of(name, frozenset(args.without))
    fixes = list(twins)
    script_args = spec["smoke"] if args.smoke else spec["args"]
    command = [sys.executable, "-m", "aiprof.cli.main", "try", "--json", "--out", str(records),
               "--rounds", str(args.rounds), "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--warmup-s", f"{args.warmup_s:g}",
               "--min-timed-s", f"{args.min_timed_s:g}", "--statistic", args.statistic,
               "--spawn", args.spawn, "--budget", f"{budget_s:.0f}",
               "--timeout", str(args.timeout)]
    command += ["--auto"] if args.mode == "auto" else ["--fix", ",".join(fixes)]
    if args.aa:
        command += ["--aa"]
    for fix, twin in twins.items():
        command += ["--edited", f"{fix}_twin={_shown(twin)}"]
    if spec.get("steps_from"):
        command += ["--steps-from", spec["steps_from"]]
    command += ["--", "python", _shown(WORKLOADS / f"{name}.py"), *script_args]
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          timeout=budget_s + 2 * args.timeout)
    wall = time.monotonic() - start
    if not done.stdout.strip().startswith("{"):
        return {"script": name, "status": "failed", "exit_code": done.returncode,
                "stderr_tail": done.stderr.splitlines()[-20:], "wall_s": round(wall, 1)}
    document = json.loads(done.stdout)
    return {"script": name, "status": "ran", "exit_code": done.returncode,
            "wall_s": round(wall, 1), "fixes": fixes, "comparison": compare(document, fixes),
            "try": document}


def machine() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                            "host": platform.node(), "cores": os.cpu_count()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
    return info


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scripts", nargs="*", help=f"some of {', '.join(SCRIPTS)}")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (CPU)")
    parser.add_argument("--budget", type=float, default=480.0, help="seconds for all scripts")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--warmup-s", type=float, default=0.5,
                        help="minimum warm-up seconds per process on CUDA")
    parser.add_argument("--min-timed-s", type=float, default=0.0,
                        help="timed steps last at least this long per process")
    parser.add_argument("--statistic", choices=("median", "floor"), default="median")
    parser.add_argument("--aa", action="store_true",
                        help="an A/A variant in every round (the noise between processes)")
    parser.add_argument("--spawn", choices=("fork", "exec"), default="fork")
    parser.add_argument("--without", action="append", default=[], metavar="FIX",
                        help="leave this fix (and its twin) out, e.g. compile")
    parser.add_argument("--timeout", type=float, default=150.0, help="per variant process")
    parser.add_argument("--mode", choices=("twins", "auto"), default="twins")
    parser.add_argument("--tag", default="", help="write suite-TAG.json (for split runs)")
    args = parser.parse_args()
    names = args.scripts or list(SCRIPTS)
    unknown = [n for n in names if n not in SCRIPTS]
    if unknown:
        parser.error(f"unknown script {unknown[0]}; known: {', '.join(SCRIPTS)}")
    out = Path(os.environ.get("OUT", "out")) / "try"
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    results, skipped = [], []
    with tempfile.TemporaryDirectory() as records:
        for index, name in enumerate(names):
            left = args.budget - (time.monotonic() - start)
            needs = SCRIPTS[name].get("needs")
            if needs and importlib.util.find_spec(needs) is None:
                skipped.append({"script": name, "reason": f"{needs} is not installed"})
                continue
            if left < MIN_SCRIPT_S:
                skipped.append({"script": name, "reason": f"budget: {left:.0f} s left"})
                continue
            without = frozenset(args.without)
            share = left * weight(name, without) / sum(weight(n, without)
                                                       for n in names[index:])
            print(f"try_suite: {name} (budget {share:.0f} s)", file=sys.stderr, flush=True)
            results.append(run_script(name, SCRIPTS[name], args, Path(records), share))
            print(json.dumps(results[-1].get("comparison", results[-1]), indent=None)[:2000],
                  file=sys.stderr, flush=True)
            write(out, args, results, skipped, start)
    summary = write(out, args, results, skipped, start)
    print(json.dumps(summary), file=sys.stderr)
    return 0


def write(out: Path, args: argparse.Namespace, results: list[dict[str, Any]],
          skipped: list[dict[str, Any]], start: float) -> dict[str, Any]:
    """Write the suite's document (after every script: a killed run keeps what it measured)."""
    pairs = [p for r in results for p in r.get("comparison", [])]
    judged = [p for p in pairs if p["agree"] is not None]
    summary = {"num_pairs": len(pairs), "num_judged": len(judged),
               "num_agree": sum(1 for p in judged if p["agree"])}
    document = {"suite": "try_suite", "smoke": args.smoke, "mode": args.mode,
                "protocol": {"rounds": args.rounds, "steps": args.steps, "warmup": args.warmup,
                             "warmup_s": args.warmup_s, "min_timed_s": args.min_timed_s,
                             "aa": args.aa, "statistic": args.statistic, "spawn": args.spawn,
                             "without": args.without,
                             "budget_s": args.budget, "agree_rel": AGREE_REL,
                             "agree_points": AGREE_POINTS},
                "machine": machine(), "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                "wall_s": round(time.monotonic() - start, 1), "summary": summary,
                "skipped": skipped, "scripts": results}
    name = f"suite-{args.tag}.json" if args.tag else "suite.json"
    (out / name).write_text(json.dumps(document, indent=1) + "\n")
    return summary


if __name__ == "__main__":
    sys.exit(main())
