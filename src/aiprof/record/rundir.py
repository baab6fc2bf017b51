"""Choosing and creating the run record directory: ``<out>/<name>-<timestamp>/`` and ``latest``.

Under torchrun every rank must write into the same directory. ``aiprof run --nproc`` passes
it down in ``AIPROF_RUN_DIR``; ranks started by a user's own torchrun agree through a small
claim file: the first rank to create it picks the directory, the others read its name.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from aiprof.errors import InputError
from aiprof.record.runrecord import LATEST_LINK

RUN_DIR_ENV = "AIPROF_RUN_DIR"
"""Environment variable naming the run directory shared by all ranks."""
CLAIM_WAIT_S = 60.0


def timestamp(unix_s: float) -> str:
    """UTC time as used in run directory names: ``20261130-053000``."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(unix_s))


def ensure_writable(root: Path) -> None:
    """Create ``root``; raise ``InputError`` when it cannot be written."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".aiprof-probe-"):
            pass
    except OSError as error:
        raise InputError(
            f"cannot write run records under {root}: {error.strerror or error}; "
            "choose another directory with --out"
        ) from None


def new_run_dir(root: Path, name: str, unix_s: float) -> Path:
    """Create a fresh ``<root>/<name>-<timestamp>[-k]`` directory (an absolute path)."""
    root = root.absolute()
    ensure_writable(root)
    base = f"{name}-{timestamp(unix_s)}"
    for suffix in range(1000):
        candidate = root / (base if suffix == 0 else f"{base}-{suffix}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise InputError(f"too many runs named {base} under {root}")


def _job_key(environ: Mapping[str, str]) -> str:
    parts = [environ.get(key, "") for key in (
        "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
        "WORLD_SIZE")]
    parts.append(str(os.getppid()))  # the torchrun agent that started the local ranks
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]


def shared_run_dir(root: Path, name: str, environ: Mapping[str, str], unix_s: float,
                   sleep: Callable[[float], None] = time.sleep) -> Path:
    """The run directory of this job: from ``AIPROF_RUN_DIR``, or agreed between local ranks."""
    root = root.absolute()
    if environ.get(RUN_DIR_ENV):
        run_dir = Path(environ[RUN_DIR_ENV]).absolute()
        ensure_writable(run_dir)
        return run_dir
    if int(environ.get("WORLD_SIZE", "1")) <= 1:
        return new_run_dir(root, name, unix_s)
    ensure_writable(root)
    claim = root / f".claim-{_job_key(environ)}"
    try:
        fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return _wait_for_claim(claim, sleep)
    run_dir = new_run_dir(root, name, unix_s)
    os.write(fd, run_dir.name.encode())
    os.close(fd)
    return run_dir


def _wait_for_claim(claim: Path, sleep: Callable[[float], None]) -> Path:
    waited = 0.0
    while waited < CLAIM_WAIT_S:
        name = claim.read_text().strip()
        if name and (claim.parent / name).is_dir():
            return claim.parent / name
        sleep(0.05)
        waited += 0.05
    raise InputError(f"another rank claimed {claim} but never created its run directory")


def release_claims(root: Path, environ: Mapping[str, str]) -> None:
    """Remove this job's claim file (rank 0, at the end of the run)."""
    (root / f".claim-{_job_key(environ)}").unlink(missing_ok=True)


RANK_EXIT_PREFIX = ".exit-rank"
"""``.exit-rank<N>``: the exit status rank N's script ended with (under ``--nproc``)."""


def write_rank_exit(run_dir: Path, rank: int, exit_code: int) -> None:
    """Leave rank ``rank``'s exit status for the ``--nproc`` parent (best effort)."""
    try:
        (run_dir / f"{RANK_EXIT_PREFIX}{rank}").write_text(f"{exit_code} {time.time_ns()}\n")
    except OSError:
        pass


def read_rank_exits(run_dir: Path, world_size: int) -> dict[int, int | None]:
    """Each rank's exit status, the rank that ended first first; None for a rank that left
    none (killed before it could)."""
    found: list[tuple[int, int, int]] = []
    missing: list[int] = []
    for rank in range(world_size):
        try:
            code, when = (run_dir / f"{RANK_EXIT_PREFIX}{rank}").read_text().split()
            found.append((int(when), rank, int(code)))
        except (OSError, ValueError):
            missing.append(rank)
    codes: dict[int, int | None] = {rank: code for _, rank, code in sorted(found)}
    return codes | dict.fromkeys(missing)


def update_latest(run_dir: Path) -> None:
    """Point ``<root>/latest`` at ``run_dir`` (a relative symlink, replaced atomically)."""
    link = run_dir.parent / LATEST_LINK
    tmp = run_dir.parent / f".{LATEST_LINK}-{os.getpid()}"
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(run_dir.name, target_is_directory=True)
        os.replace(tmp, link)
    except OSError:
        tmp.unlink(missing_ok=True)
