#!/usr/bin/env bash
# Overhead of aiprof run (with NVML sampling at 20 Hz) over plain torch.profiler, on the GPU.
# Run from the repository root:  OUT=/some/dir bash scripts/h200/capture_overhead.sh
# Writes $OUT/capture/overhead.json and prints the summary; about 40 s; never fails the batch.
set -u
cd "$(dirname "$0")/../.." || exit 0
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"
dest="${OUT:-out}/capture"
mkdir -p "$dest"
timeout -s TERM 80 python3 benchmarks/capture_overhead.py --device cuda --reps 6 --steps 60 \
  --batch 256 --json "$dest/overhead.json" 2> "$dest/overhead.stderr" | tail -n 3
echo "capture_overhead: exit ${PIPESTATUS[0]}"
exit 0
