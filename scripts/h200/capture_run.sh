#!/usr/bin/env bash
# aiprof run on a ResNet-50 and a GPT-2 training script; run records land in $OUT/capture/.
# Run from the repository root:  OUT=/some/dir bash scripts/h200/capture_run.sh
# Needs: torch (CUDA), torchvision, transformers, msgspec, numpy, rich, isal, nvidia-ml-py.
# Takes about 60 s; never fails the batch (errors are reported in summary.json).
set -u
cd "$(dirname "$0")/../.." || exit 0
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"
dest="${OUT:-out}/capture"
mkdir -p "$dest"
python3 -c "import pynvml" 2>/dev/null || echo "capture: WARNING nvidia-ml-py (pynvml) missing: no GPU samples"

capture() {  # name timeout_s active_steps script args...
  local name=$1 limit=$2 active=$3; shift 3
  timeout -s TERM "$limit" python3 -m aiprof.cli.main run --out "$dest/$name" --name "$name" \
    --skip 4 --warmup 1 --active "$active" --sample-rate 20 --json -- python3 "$@" \
    > "$dest/$name.stdout" 2> "$dest/$name.stderr"
  echo "capture: $name exit $?"
}

capture resnet50 30 2 scripts/h200/workloads/resnet50_train.py --steps 10 --batch 64
capture gpt2 25 2 scripts/h200/workloads/gpt2_train.py --steps 10 --batch 8 --seq 512
# a small record meant to be committed as test data (tests/data/capture/)
capture gpt2_small 20 1 scripts/h200/workloads/gpt2_train.py --steps 8 --batch 2 --seq 128 --layers 2
python3 scripts/h200/capture_summary.py "$dest" || echo "capture: summary failed"
exit 0
