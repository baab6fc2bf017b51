"""A fix's gain on a host faster or slower than the trace's.

The same step's CPU work moved by 0.8-1.25 times and more between sessions on one H200
(docs/diagnose.md: efficientnet_b0's base 43.3-59.9 ms, its pinned step 36.2-52.3 ms;
resnet34's 18.2 and 26 ms; rl_policy's launch-bound base 22 and 36-55 ms), and within one
process between the timed rounds and the capture (resnet50_pageable: rounds of 19.2 ms, the
capture's unprofiled steps 22.8-26.4 ms). A gain depends on it wherever the step, or the fixed
step, sits near the host/GPU balance: a GPU-side fix gains less on a slower host (the host
becomes the bound), a host-side one more. The trace shows one host speed; the replay can say
how each gain moves with it.

The host is modelled as every CPU work and call of the step taking ``factor`` times the
trace's (the replay's ``launch_work_scale``, nothing protected, the launch calls scaled too),
the fix's own host changes included (``torch.compile``'s generated code, counted in the
trace's launch calls, runs at the same host's speed). The GPU's side is the trace's.
"""

from __future__ import annotations

from dataclasses import replace

from aiprof.analysis import intervals as iv
from aiprof.diagnose.context import Context
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.replay import Change

HOST_TIME_FACTORS = (0.8, 1.25)
"""Host speeds each gain is also given at: every CPU work and call of the step 0.8 and 1.25
times the trace's (the spread the sessions of the suite showed, above)."""


def on_host(change: Change | None, factor: float) -> Change:
    """``change`` (None: the step as it is) on a host whose CPU work and calls take ``factor``
    times the trace's. Only a change that scales no CPU work itself (``launch_work_scale``
    1.0: every fix but a CUDA graph, whose rule replays its graphed step as it is)."""
    if change is None:
        return Change(launch_work_scale=factor)
    if change.launch_work_scale != 1.0:
        raise ValueError("a change that scales the host's work has no other host speed")
    return replace(change, launch_work_scale=factor, protected_cpu=iv.EMPTY,
                   keep_launch_calls=False)


def gains_on_hosts(ctx: Context, change: Change,
                   factors: tuple[float, ...] = HOST_TIME_FACTORS) -> list[float]:
    """``change``'s gain, in % of the step on the same host, for each of ``factors``, within
    [0, 100]."""
    gains = []
    for factor in factors:
        base_us = ctx.replay_us(on_host(None, factor))
        saved = 100.0 * (1.0 - ctx.replay_us(on_host(change, factor)) / base_us) \
            if base_us > 0 else 0.0
        gains.append(float(min(100.0, max(0.0, saved))))
    return gains


def with_host_speeds(ctx: Context, finding: Finding) -> Finding:
    """``finding`` with its gain on a faster and a slower host in its evidence
    (``gain_at_host_speeds``), where its rule gives none itself and its change can be
    replayed so; held to the same share of the replay's gain as the finding's own estimate
    where the parts it removes bound that (``explain.bounded_gain``)."""
    change = finding.change
    if (change is None or "gain_at_host_speeds" in finding.evidence
            or change.launch_work_scale != 1.0):
        return finding
    removed = finding.evidence.get("replay_removed")
    replayed_ms = removed.get("replay_gain_ms_per_step") if isinstance(removed, dict) else None
    share = (min(1.0, finding.estimated_gain_ms_per_step / replayed_ms)
             if isinstance(replayed_ms, (int, float)) and replayed_ms > 0 else 1.0)
    speeds = [{"host_time_factor": factor, "gain_pct": round(gain * share, 1)}
              for factor, gain in zip(HOST_TIME_FACTORS, gains_on_hosts(ctx, change),
                                      strict=True)]
    return replace(finding, evidence={**finding.evidence, "gain_at_host_speeds": speeds})
