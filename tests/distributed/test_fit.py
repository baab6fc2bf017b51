"""α/β fit recovers known parameters and reports its error."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiprof.distributed.collectives import collective_time_us
from aiprof.distributed.fit import fit_alpha_beta
from aiprof.distributed.links import LinkParams
from aiprof.errors import InputError


@given(
    st.sampled_from(["allreduce", "allgather", "reducescatter"]),
    st.integers(2, 64),
    st.floats(0.5, 50),
    st.floats(1, 500),
)
def test_fit_recovers_ring_parameters(collective, p, alpha, bw):
    link = LinkParams(name="x", alpha_us=alpha, bandwidth_gbps=bw)
    sizes = [2**k for k in range(10, 31, 2)]
    times = [collective_time_us(collective, n, p, link, "ring") for n in sizes]
    fit = fit_alpha_beta(collective, p, sizes, times)
    assert fit.alpha_us == pytest.approx(alpha, rel=1e-6)
    assert fit.bandwidth_gbps == pytest.approx(bw, rel=1e-6)
    assert fit.max_rel_error_pct < 1e-6
    again = [collective_time_us(collective, n, p, fit.link(), "ring") for n in sizes]
    assert np.allclose(again, times, rtol=1e-6)


def test_fit_with_noise_stays_within_noise():
    rng = np.random.default_rng(0)
    sizes = np.array([2**k for k in range(20, 31)], dtype=float)
    true = 30 + sizes / 150e3  # 30 µs + 150 GB/s
    noisy = true * (1 + rng.uniform(-0.05, 0.05, len(sizes)))
    fit = fit_alpha_beta("allreduce", 2, sizes, noisy)
    assert fit.max_rel_error_pct < 10
    assert fit.bandwidth_gbps == pytest.approx(2 * 1 / 2 * 150, rel=0.1)  # factor 2(p−1)/p = 1


def test_fit_window_and_errors():
    sizes, times = [8, 16, 1 << 20, 1 << 21], [5, 5, 100, 200]
    fit = fit_alpha_beta("allreduce", 2, sizes, times, min_bytes=1 << 20)
    assert fit.num_points == 2 and fit.fit_min_bytes == 1 << 20
    with pytest.raises(InputError):
        fit_alpha_beta("allreduce", 2, [1 << 20], [10.0])
    with pytest.raises(InputError):
        fit_alpha_beta("allreduce", 1, sizes, times)
    with pytest.raises(InputError):
        fit_alpha_beta("allreduce", 2, [1, 2, 3], [3.0, 2.0, 1.0])


def test_protocol_fit_recovers_a_two_line_envelope():
    from aiprof.distributed.fit import fit_protocols, predict_us

    sizes = [2**k for k in range(10, 31)]
    # Two regimes: a low-latency, low-bandwidth protocol and a high-bandwidth one (µs, µs/B).
    lines = [(5.0, 1 / 50e3), (40.0, 1 / 400e3)]
    times = [min(a + b * n for a, b in lines) for n in sizes]
    fits = fit_protocols("allreduce", 2, sizes, times)
    worst = max(abs(predict_us(fits, n) - t) / t for n, t in zip(sizes, times, strict=True))
    assert worst < 1e-6
    assert len(fits) >= 2
    assert min(f.intercept_us for f in fits) == pytest.approx(5.0, rel=1e-6)
    single = fit_alpha_beta("allreduce", 2, sizes, times)
    assert single.max_rel_error_pct > 100 * worst  # one line cannot follow the switch


def test_protocol_fit_tracks_the_nccl_shaped_model_within_a_few_percent():
    from aiprof.distributed.fit import fit_protocols, predict_us
    from aiprof.distributed.nccl_model import NcclTopology, model_nccl

    topo = NcclTopology(num_ranks=2, bus_bandwidth_gbps=370)
    sizes = [2**k for k in range(20, 31)]
    rng = np.random.default_rng(1)
    times = [
        model_nccl("allreduce", n, topo).time_us * (1 + rng.uniform(-0.03, 0.03)) for n in sizes
    ]
    fits = fit_protocols("allreduce", 2, sizes, times)
    assert max(abs(predict_us(fits, n) - t) / t for n, t in zip(sizes, times, strict=True)) < 0.05
