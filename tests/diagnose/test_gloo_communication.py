"""Failure class 6: a CPU-only 2-rank gloo run whose all-reduce is most of the step is diagnosed
(its communication), not "nothing to diagnose". Real torch.distributed (gloo) under a real
torch.profiler, two processes: recorded on the 2-core CPU VM on 2026-12-01 by
``gloo_allreduce_worker.py`` (tests/data/diagnose/gloo_allreduce_2rank), and recorded again
live by the slow test."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.gloo import run_ranks

from aiprof.diagnose import diagnose

pytestmark = pytest.mark.cpu_hog

WORKER = Path(__file__).with_name("gloo_allreduce_worker.py")
RECORDED = Path(__file__).parents[1] / "data" / "diagnose" / "gloo_allreduce_2rank"


def gloo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gloo")
    return run_ranks(WORKER, out, timeout_s=120)


def test_recorded_gloo_run_gets_its_communication_diagnosed() -> None:
    assert_communication_diagnosed(RECORDED)


@pytest.mark.slow
def test_gloo_run_recorded_now_gets_its_communication_diagnosed(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    pytest.importorskip("torch")
    assert_communication_diagnosed(gloo_run(tmp_path_factory))


def assert_communication_diagnosed(folder: Path) -> None:
    result = diagnose(folder)
    assert result.num_ranks == 2 and result.device is None
    comm = next(f for f in result.findings if f.category == "communication_exposed")
    assert comm.evidence["source"] == "host collectives"
    exposed = comm.evidence["exposed_comm_ms_per_step"]
    step_ms = result.step_us / 1000
    assert exposed > 0.3 * step_ms  # a 16 MB all-reduce against a 256x256 matmul
    # overlap hides at most the compute: the bound, not the exposed share
    bound = min(exposed, comm.evidence["compute_ms_per_step"])
    assert comm.estimated_gain_ms_per_step <= bound + 0.003
    assert not result.verdict.startswith("No GPU activity")
