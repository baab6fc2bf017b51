"""GIVEN the H200 run record of GPT-2 training captured with 'aiprof run --with-stack'
(scripts/h200/views_record.sh, 2026-12-01) WHEN its Python call tree is built THEN the frames
carry CPU time and the GPU time of the kernels launched under them, never more than the trace's
kernels: backward kernels are launched from autograd's own thread, which has no Python frame
(on this record the frames hold 28% of the kernel time, the forward pass)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiprof import load_traces
from aiprof.analysis.python_tree import python_call_tree

RUN = Path(__file__).parents[1] / "data" / "views" / "h200_gpt2_stack_run"


def test_python_tree_of_a_real_h200_record() -> None:
    trace = load_traces(RUN)[0]
    assert trace.device is not None and "H200" in trace.device.name
    tree = python_call_tree(trace)
    assert tree.total_cpu_us > 0
    roots_gpu = sum(n.total_gpu_us for n in tree.nodes if n.parent == -1)
    kernels_us = float(trace.kernels.dur_us.sum())
    assert 0 < roots_gpu <= kernels_us * (1 + 1e-9)
    assert any(n.self_gpu_us > 0 for n in tree.nodes)


def test_the_harness_above_the_script_is_left_out_by_default() -> None:
    trace = load_traces(RUN)[0]
    tree = python_call_tree(trace)
    everything = python_call_tree(trace, harness=True)
    roots = [n.name for n in tree.nodes if n.parent == -1]
    assert any("gpt2_train.py" in name and name.endswith("<module>") for name in roots)
    assert not any("aiprof/capture/sampler.py" in n.name for n in tree.nodes)
    assert any("aiprof/capture/sampler.py" in n.name for n in everything.nodes)
    assert not any(name.startswith(("threading.py", "<frozen runpy>", "aiprof/cli"))
                   for name in roots)
    # aiprof's step hook inside optimizer.step() is the user's step time: it stays
    assert any("aiprof/capture/steps.py" in n.name for n in tree.nodes)
    gpu = sum(n.total_gpu_us for n in tree.nodes if n.parent == -1)
    assert gpu == pytest.approx(sum(n.total_gpu_us for n in everything.nodes if n.parent == -1))
