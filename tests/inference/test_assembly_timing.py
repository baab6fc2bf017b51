"""``--assembly auto``: every engine way timed on the model's own inputs, the lowest P99 under
load chosen."""

from __future__ import annotations

import torch

from aiprof.measure.inference.assembly_timing import assembly_for, choose_assembly


def test_auto_times_every_way_this_device_has_and_serves_with_one() -> None:
    inputs = torch.randn(16, 3, 8, 8)
    used, costs = assembly_for(inputs, 4, "cpu", "auto")
    assert set(costs) == {"gather", "take"}  # direct needs CUDA
    for way in costs.values():
        assert set(way) == {"alone", "loaded"}
        for by_size in way.values():
            assert set(by_size) == {1, 4}
            for stats in by_size.values():
                assert 0 < stats["p50_us"] <= stats["p99_us"]
    assert used == choose_assembly(costs)


def test_an_asked_way_is_not_timed() -> None:
    assert assembly_for(torch.randn(4, 2), 4, "cpu", "take") == ("take", {})


def test_the_lowest_p99_under_load_summed_over_sizes_wins() -> None:
    def way(*p99_us: float) -> dict[str, dict[int, dict[str, float]]]:
        return {"loaded": {size: {"p99_us": p} for size, p in zip((1, 32), p99_us, strict=True)}}

    costs = {"gather": way(10.0, 8_000.0), "take": way(20.0, 900.0), "direct": way(90.0, 300.0),
             "copy_ rows": way(1.0, 1.0)}  # not an engine way: never chosen
    assert choose_assembly(costs) == "direct"
    assert choose_assembly({"direct": {"error": "no CUDA"}}) == "take"


def test_the_line_printed_names_the_way_and_what_each_took_for_the_largest_batch() -> None:
    from aiprof.report.serving_terminal import assembly_line

    costs = {"gather": {"loaded": {1: {"p99_us": 500.0}, 32: {"p99_us": 7_130.0}}},
             "take": {"loaded": {1: {"p99_us": 350.0}, 32: {"p99_us": 2_180.0}}},
             "direct": {"error": "no CUDA"}}
    assert assembly_line("take", "auto", costs) == (
        "assembly: take (auto: P99 under load per batch of 32: take 2.18 ms, gather 7.13 ms)")
    assert assembly_line("gather", "gather", {}) == "assembly: gather"
