#!/usr/bin/env bash
# A run record for docs/views.md's Python and memory sections: GPT-2 training under
# 'aiprof run --with-stack' (Python stacks, memory, shapes, NVML samples), then the report.
# Run from the repository root:  OUT=/some/dir bash scripts/h200/views_record.sh
# On CPU with tiny sizes (to check the script):  SMOKE=1 OUT=/tmp/v bash scripts/h200/views_record.sh
# Writes 6 files: $OUT/views/gpt2_stack-<time>/{meta.json,rank0.trace.json.gz,gpu_samples.csv,
# stdout.log}, $OUT/views/report.html, $OUT/views/log.txt (and the link views/latest).
# Takes about 40 s on one H200.
set -u
cd "$(dirname "$0")/../.." || exit 0
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"
dest="${OUT:-out}/views"
mkdir -p "$dest"
if [ "${SMOKE:-0}" = "1" ]; then
  sizes=(--steps 6 --batch 1 --seq 32 --layers 1)
else
  sizes=(--steps 10 --batch 8 --seq 512)
fi
{
  timeout -s TERM 300 python3 -m aiprof.cli.main run --out "$dest" \
    --name gpt2_stack --with-stack --skip 3 --warmup 1 --active 2 --sample-rate 20 -- \
    python3 scripts/h200/workloads/gpt2_train.py "${sizes[@]}"
  echo "views: run exit $?"
  timeout -s TERM 200 python3 -m aiprof.cli.main report "$dest" -o "$dest/report.html"
  echo "views: report exit $?"
  timeout -s TERM 60 python3 -m aiprof.cli.main hotspots "$dest" --min-pct 2
  echo "views: hotspots exit $?"
} > "$dest/log.txt" 2>&1
tail -3 "$dest/log.txt"
exit 0
