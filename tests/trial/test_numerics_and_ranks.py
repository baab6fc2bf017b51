"""The numerics guard and the merge of ranks (the slowest rank's step)."""

from __future__ import annotations

from aiprof.trial.numerics import check_numerics
from aiprof.trial.runs import FAILED, OK, from_rank_documents
from aiprof.trial.stats import excess_s


def test_a_fix_that_moves_the_loss_is_flagged() -> None:
    base = [(2.30, 2.20, 2.10), (2.30, 2.20, 2.10)]
    kept = check_numerics(base, [(2.3001, 2.2002, 2.1001)])
    moved = check_numerics(base, [(2.30, 2.50, 2.40)])
    assert kept is not None and not kept.flagged
    assert moved is not None and moved.flagged and moved.max_rel_diff > 0.1


def test_base_rounds_that_disagree_widen_the_tolerance() -> None:
    base = [(2.0, 1.9), (2.2, 2.1)]  # unseeded script: 10% apart run to run
    check = check_numerics(base, [(2.1, 2.0)])
    assert check is not None and not check.flagged and check.tolerance > 0.1


def test_no_watched_values_means_no_check() -> None:
    assert check_numerics([()], [(1.0,)]) is None


def _doc(rank: int, steps: list[float], **extra: object) -> dict[str, object]:
    return {"rank": rank, "num_steps": 7, "needed_steps": 7, "step_us": steps,
            "host_step_us": [1.0] * 6, "clock": "host", "not_applicable": "",
            "watch": {"source": "variable loss", "values": [1.0]},
            "peak_gpu_allocated_bytes": None, "peak_host_rss_bytes": 100 + rank, **extra}


def test_the_step_time_is_the_slowest_rank_per_step() -> None:
    run = from_rank_documents("base", 0, [_doc(1, [5.0, 1.0, 3.0]), _doc(0, [2.0, 4.0, 3.5])])
    assert run.status == OK and run.step_us == (5.0, 4.0, 3.5)
    assert run.peak_memory_bytes == 101 and run.memory_kind == "host"


def test_a_rank_that_ended_early_fails_the_variant() -> None:
    short = _doc(1, [], num_steps=2, ended="exception", error="RuntimeError: boom")
    run = from_rank_documents("tf32", 1, [_doc(0, [1.0]), short], tail=("boom",))
    assert run.status == FAILED and "RuntimeError: boom" in run.reason
    assert "after 2 of the 7" in run.reason and run.tail == ("boom",)


def test_compile_time_is_the_warmup_excess() -> None:
    assert excess_s([30e6, 1.2e6, 1.0e6], [1.0e6, 1.0e6, 1.1e6]) == (29e6 + 0.2e6) / 1e6
