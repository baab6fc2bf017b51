"""The ways of assembling a batch put the same rows where the model reads them (CPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from aiprof.errors import InputError
from aiprof.measure.inference.assembly import ASSEMBLIES, Assembler, byte_rows, check_assembly
from aiprof.measure.inference.engine import ServingEngine
from aiprof.measure.inference.stack_costs import loaded_wake_us


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("name", ["gather", "take"])
def test_host_assembly_copies_the_requested_rows_in_order(name, dtype):
    inputs = (torch.arange(10 * 3 * 4) % 97).reshape(10, 3, 4).to(dtype)
    host_in = torch.full((6, 3, 4), -1).to(dtype)
    slots = [7, 0, 7, 3]
    Assembler(name, inputs).to_host(slots, host_in, byte_rows(host_in))
    assert torch.equal(host_in[:4], inputs[slots])
    assert (host_in[4:] == -1).all()  # the rows past the batch are left alone


def test_the_device_copy_moves_the_padded_rows():
    inputs = torch.randn(5, 8)
    host_in, dev_in = torch.randn(4, 8), torch.zeros(4, 8)
    Assembler("take", inputs).to_device([1, 2], host_in, dev_in, 4)
    assert torch.equal(dev_in, host_in)


def test_an_unknown_assembly_or_direct_without_cuda_is_an_input_error():
    assert check_assembly("take", cuda=False) == "take" and "direct" in ASSEMBLIES
    with pytest.raises(InputError, match="choose one of"):
        check_assembly("scatter", cuda=False)
    with pytest.raises(InputError, match="--device cuda"):
        ServingEngine(torch.nn.Linear(8, 2), torch.randn(4, 8), assembly="direct")


@pytest.mark.parametrize("name", ["gather", "take"])
def test_the_engine_answers_each_request_from_its_own_slot(name):
    inputs = torch.eye(6)  # row i's argmax is i
    engine = ServingEngine(torch.nn.Identity(), inputs, max_batch=4, assembly=name)
    assert engine([(10, 3), (11, 5), (12, 3)]) == [3, 5, 3]
    assert engine.assembly == name and engine.costs_since().batch_sizes == (3,)


def test_the_engine_records_how_far_a_batch_of_a_size_runs_past_its_median():
    engine = ServingEngine(torch.nn.Identity(), torch.eye(6), max_batch=4)
    for _ in range(10):
        engine([(0, 1), (1, 2)])
    engine([(0, 1)])
    costs = engine.costs_since()
    assert costs.batch_sizes == (1, 2) and costs.num_batches == (1, 10)
    assert all(p90 >= median for p90, median in zip(costs.wall_p90_us, costs.wall_us,
                                                     strict=True))
    assert all(p90 >= median for p90, median in zip(costs.device_p90_us, costs.device_us,
                                                     strict=True))
    assert costs.wall_p90_us[0] == costs.wall_us[0]  # one batch: its own time


def test_the_engine_gives_each_batchs_times_over_its_sizes_median_for_the_simulator():
    engine = ServingEngine(torch.nn.Identity(), torch.eye(6), max_batch=4)
    for _ in range(10):
        engine([(0, 1), (1, 2)])
    engine([(0, 1)])  # one batch of 1: no median to compare with, left out
    spread = engine.spread_since(min_batches=3)
    assert spread.device is not None and spread.host is not None
    for found in (spread.device, spread.host):
        assert found.batch_sizes == (2,) and len(found.factors[0]) == 10
        assert np.median(found.factors[0]) == pytest.approx(1.0)
        assert list(found.factors[0]) == sorted(found.factors[0])
    assert engine.spread_since(engine.mark()).device is None  # nothing run since


def test_the_engine_records_the_threads_lag_past_the_device_of_the_batches_with_a_clear_stream():
    engine = ServingEngine(torch.nn.Identity(), torch.eye(6), max_batch=4)
    for _ in range(5):
        engine([(0, 1), (1, 2)])
    costs = engine.costs_since()
    assert costs.num_clear_batches == (5,)  # on the CPU no batch waits behind another's work
    # the wait for the results holds the device time and what follows it: never less
    assert 0 <= costs.wake_us[0] <= costs.sync_wait_us[0]
    assert loaded_wake_us(costs) == ((2, costs.wake_us[0]),)
