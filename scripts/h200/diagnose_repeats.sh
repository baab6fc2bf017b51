#!/usr/bin/env bash
# The .item() case of the diagnose suite recorded again in fresh processes, to show how much
# one recording and its measured gain vary. Writes $OUT/item_repeat_<i>/ (trace + labels.json).
# Run from the repository root on a CUDA machine:  OUT=/some/dir bash scripts/h200/diagnose_repeats.sh [N]
set -u
cd "$(dirname "$0")/../.." || exit 0
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"
for i in $(seq 1 "${1:-4}"); do
  DIAGNOSE_DIR="item_repeat_$i" python3 scripts/h200/diagnose_suite.py item_sync_per_layer \
    | tail -n 1
done
exit 0
