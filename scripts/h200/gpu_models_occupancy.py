"""Ground truth for aiprof's occupancy model: the CUDA occupancy API over a sweep.

Builds gpu_models_occupancy.cu (nvcc -arch=sm_90) and records
cudaOccupancyMaxActiveBlocksPerMultiprocessor over >= 5,000 (kernel variant x block size x
dynamic shared memory) configurations (plus a carveout sweep), each variant's
cudaFuncAttributes and the device properties. Output in $OUT/gpu_models/: occupancy_api.csv.gz,
kernel_attrs.csv, device_props.csv. Run from the repo root:
    OUT=/tmp/out python3 scripts/h200/gpu_models_occupancy.py
"""

from __future__ import annotations

import gzip
import shutil
import sys
from pathlib import Path

import gpu_models_common as common


def occupancy_sweep(out: Path) -> str:
    binary = out / "build" / "occ"
    common.build("gpu_models_occupancy.cu", binary)
    done = common.run([str(binary), str(out)], timeout=40)
    plain = out / "occupancy_api.csv"
    with plain.open("rb") as src, gzip.GzipFile(str(plain) + ".gz", "wb", mtime=0) as dst:
        shutil.copyfileobj(src, dst)
    plain.unlink()
    binary.unlink()
    return done.stdout.strip()


if __name__ == "__main__":
    sys.exit(common.main(occupancy_sweep))
