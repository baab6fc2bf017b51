"""Real two-rank gloo runs for tests: a worker script started once per rank on a free port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path


def free_port() -> int:
    """A TCP port nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ranks(worker: Path, out: Path, *, world_size: int = 2, timeout_s: float = 180) -> Path:
    """Run ``python worker out`` as ``world_size`` ranks (RANK, WORLD_SIZE, MASTER_ADDR/PORT
    set); every rank must exit 0. Returns ``out``."""
    env = {**os.environ, "WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port()), "PYTHONWARNINGS": "ignore"}
    procs = [subprocess.Popen([sys.executable, str(worker), str(out)],
                              env={**env, "RANK": str(rank)}, stderr=subprocess.PIPE, text=True)
             for rank in range(world_size)]
    for p in procs:
        _, err = p.communicate(timeout=timeout_s)
        assert p.returncode == 0, err[-2000:]
    return out
