#!/usr/bin/env bash
# Run several GPU scripts in one go and pack everything they wrote into $OUT/results.tar.gz.
# Usage, from the repository root on a CUDA machine:
#   OUT=/some/dir bash scripts/h200/run_batch.sh foundation_traces.py:120 capture_run.sh:90 ...
# Each item is SCRIPT[:TIMEOUT_S] under scripts/h200/ (.py run with python3, .sh with bash;
# a "torchrun/" prefix runs a .py under torchrun on every local GPU). Wheels in .whl/ (for
# packages the machine lacks) are installed to a private directory first. A failing script
# never stops the batch; its log is in logs/.
set -u
cd "$(dirname "$0")/../.." || exit 1
final="${OUT:-out}"
stage="$(mktemp -d)"
export OUT="$stage" PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH="/tmp/site"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$stage/logs"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv \
  > "$stage/logs/nvidia-smi.csv" 2>&1
gpus="$(nvidia-smi -L 2>/dev/null | wc -l)"
for item in "$@"; do
  script="${item%%:*}"
  limit="${item##*:}"; [ "$limit" = "$item" ] && limit=300
  name="$(basename "$script")"
  start=$SECONDS
  case "$script" in
    torchrun/*) cmd=(torchrun --standalone --nproc_per_node "$gpus" "scripts/h200/${script#torchrun/}") ;;
    *.sh) cmd=(bash "scripts/h200/$script") ;;
    *) cmd=(python3 "scripts/h200/$script") ;;
  esac
  timeout -s TERM "$limit" "${cmd[@]}" > "$stage/logs/$name.log" 2>&1
  code=$?
  echo "== $name: exit $code in $((SECONDS - start)) s"
  tail -n 6 "$stage/logs/$name.log"
done
tar -czf "$final/results.tar.gz" -C "$stage" .
ls -la "$final"
