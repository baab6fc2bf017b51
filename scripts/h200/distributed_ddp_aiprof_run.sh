#!/usr/bin/env bash
# DDP ResNet-50 on 2 GPUs captured with `aiprof run --nproc 2` (the issue's capture path),
# clean and with rank 1 sleeping 50 ms per step. Run from the repo root, NOT under torchrun
# (aiprof run starts torchrun itself); about 60-90 s:
#     OUT=/tmp/out bash scripts/h200/distributed_ddp_aiprof_run.sh
# Writes $OUT/distributed/run_ddp/ and $OUT/distributed/run_ddp_straggler/ (run records:
# meta.json, rank{0,1}.trace.json.gz, logs). Commit them under tests/data/distributed/.
set -u
export NCCL_NVLS_ENABLE=0
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}src"
out="${OUT:-out}/distributed"
mkdir -p "$out"
for variant in clean straggler; do
  dir="$out/run_ddp"; extra=()
  if [ "$variant" = straggler ]; then dir="$out/run_ddp_straggler"; extra=(--sleep-rank 1); fi
  timeout 85 python3 -m aiprof.cli.main run --nproc 2 --skip 4 --warmup 2 --active 3 --no-shapes --no-memory \
      --no-gpu-samples --run-dir "$dir" -- \
      python3 scripts/h200/distributed_ddp.py --no-profile --steps 12 "${extra[@]}" \
      || echo "distributed_ddp_aiprof_run: $variant run failed (exit $?)" >&2
  ls "$dir" 2>/dev/null | sed "s/^/  $variant: /"
done
exit 0
