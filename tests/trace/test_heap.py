"""GIVEN many small arrays freed below one still alive (a trace's column chunks, the tables built
after them) WHEN ``release_freed`` runs THEN the process's resident memory drops by most of what
they held (glibc only; in a fresh process, whose heap no other test has shaped)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from aiprof.trace import heap

PROGRAM = """
import json
from pathlib import Path
import numpy as np
from aiprof.trace.heap import release_freed
def rss_mib():
    return int(Path("/proc/self/status").read_text().split("VmRSS:")[1].split()[0]) / 1024
chunks = [np.ones(2000) for _ in range(12_000)]  # 16 KB each: on the heap, not mapped; 190 MB
alive = np.ones(2000)  # above them on the heap: glibc cannot shrink the heap past it by itself
del chunks
before = rss_mib()
release_freed()
print(json.dumps({"before": before, "after": rss_mib()}))
"""


@pytest.mark.skipif(heap._malloc_trim() is None or not Path("/proc/self/status").exists(),
                    reason="malloc_trim is glibc's; RSS from /proc")
def test_freed_chunks_go_back_to_the_os() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                          check=True)
    rss = json.loads(done.stdout)
    assert rss["before"] - rss["after"] > 100, rss
