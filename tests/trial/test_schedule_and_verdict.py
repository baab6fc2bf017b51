"""Interleaving, skipping, budget and the noise verdict, with a fake launcher and clock."""

from __future__ import annotations

import random

import pytest

from aiprof.trial import stats
from aiprof.trial.orchestrate import run_trial
from aiprof.trial.plan import BASE, Protocol, VariantSpec, schedule
from aiprof.trial.result import summarize
from aiprof.trial.runs import FAILED, NOT_APPLICABLE, OK, VariantRun


class FakeClock:
    """Seconds that advance only when a fake process 'runs'."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeLauncher:
    """Each process 'runs' 10 s; its steps take ``speed[label]`` times a machine speed that
    drifts with the clock, plus seeded noise of ``noise`` relative."""

    def __init__(self, clock: FakeClock, speed: dict[str, float], *, noise: float = 0.0,
                 status: dict[str, str] | None = None, seed: int = 0) -> None:
        self.clock, self.speed, self.noise = clock, speed, noise
        self.status = status or {}
        self.rng = random.Random(seed)
        self.order: list[tuple[int, str]] = []

    def __call__(self, spec: VariantSpec, round_index: int) -> VariantRun:
        self.order.append((round_index, spec.label))
        self.clock.now += 10.0
        drift = 1.0 + 0.002 * self.clock.now  # the machine slows down over the trial
        status = self.status.get(spec.label, OK)
        if status != OK:
            return VariantRun(label=spec.label, round=round_index, status=status,
                              reason=f"planted {status}")
        steps = tuple(1000.0 * self.speed[spec.label] * drift
                      * (1.0 + self.noise * self.rng.gauss(0.0, 1.0)) for _ in range(10))
        return VariantRun(label=spec.label, round=round_index, status=OK, step_us=steps,
                          clock="host", loss=(2.0, 1.9, 1.8))


def specs(*labels: str) -> list[VariantSpec]:
    return [VariantSpec(label, "none" if label == BASE else label, ("x.py",))
            for label in (BASE, *labels)]


def test_schedule_interleaves_base_first_then_last_and_rotates_the_fixes() -> None:
    order = schedule([BASE, "a", "b", "c"], 3)
    assert order == [(0, BASE), (0, "a"), (0, "b"), (0, "c"),
                     (1, "b"), (1, "c"), (1, "a"), (1, BASE),
                     (2, BASE), (2, "c"), (2, "a"), (2, "b")]
    assert schedule([BASE], 2) == [(0, BASE), (1, BASE)]


def test_trial_runs_the_schedule_one_process_each() -> None:
    clock = FakeClock()
    launcher = FakeLauncher(clock, {BASE: 1.0, "a": 0.8, "b": 1.0})
    trial = run_trial(specs("a", "b"), 5, launcher, clock=clock)
    assert launcher.order == schedule([BASE, "a", "b"], 5)
    assert len(trial.runs) == 15 and not trial.interrupted and trial.wall_s == 150.0


def test_drift_cancels_in_paired_rounds_and_verdicts_follow_the_effect() -> None:
    clock = FakeClock()
    launcher = FakeLauncher(clock, {BASE: 1.0, "fast": 0.8, "same": 1.0, "slow": 1.25},
                            noise=0.002, seed=3)
    variants = specs("fast", "same", "slow")
    trial = run_trial(variants, 6, launcher, clock=clock)
    rows = {row.name: row for row in summarize(("x.py",), variants, trial, Protocol()).fixes}
    fast, same, slow = rows["fast"].comparison, rows["same"].comparison, rows["slow"].comparison
    assert fast is not None and same is not None and slow is not None
    # the machine slows by 2% per process slot: the gain still comes out near the truth
    assert 18.0 < fast.gain_pct < 22.0 and fast.verdict == stats.FASTER
    assert -27.0 < slow.gain_pct < -23.0 and slow.verdict == stats.SLOWER
    assert same.interval_pct[0] < 0.0 < same.interval_pct[1] or same.verdict == stats.NOISE
    assert fast.interval_pct[0] <= fast.gain_pct <= fast.interval_pct[1]


def test_noise_larger_than_the_effect_is_within_noise() -> None:
    clock = FakeClock()
    launcher = FakeLauncher(clock, {BASE: 1.0, "tiny": 0.99}, noise=0.2, seed=1)
    variants = specs("tiny")
    trial = run_trial(variants, 5, launcher, clock=clock)
    row = summarize(("x.py",), variants, trial, Protocol()).fixes[0]
    assert row.comparison is not None and row.comparison.verdict == stats.NOISE


def test_three_rounds_give_no_verdict() -> None:
    comparison = stats.compare([100.0, 101.0, 99.0], [80.0, 81.0, 79.0])
    assert comparison.verdict == stats.FEW and comparison.gain_pct == pytest.approx(20.0, abs=1)


def test_all_rounds_faster_is_faster_and_one_round_against_is_noise() -> None:
    base = [100.0] * 5
    assert stats.compare(base, [90.0, 91.0, 89.0, 90.0, 92.0]).verdict == stats.FASTER
    assert stats.compare(base, [90.0, 91.0, 89.0, 90.0, 101.0]).verdict == stats.NOISE


def test_a_variant_that_fails_or_does_not_apply_is_not_run_again_and_others_go_on() -> None:
    clock = FakeClock()
    launcher = FakeLauncher(clock, {BASE: 1.0, "ok": 0.9},
                            status={"broken": FAILED, "na": NOT_APPLICABLE})
    variants = specs("broken", "na", "ok")
    trial = run_trial(variants, 3, launcher, clock=clock)
    labels = [label for _, label in launcher.order]
    assert labels.count("broken") == 1 and labels.count("na") == 1
    assert labels.count("ok") == 3 and labels.count(BASE) == 3
    rows = {row.name: row for row in summarize(("x.py",), variants, trial, Protocol()).fixes}
    assert rows["broken"].status == FAILED and rows["broken"].reason == "planted failed"
    assert rows["na"].status == NOT_APPLICABLE and rows["ok"].status == "measured"


def test_a_failed_base_stops_the_trial() -> None:
    clock = FakeClock()
    launcher = FakeLauncher(clock, {"a": 1.0}, status={BASE: FAILED})
    trial = run_trial(specs("a"), 3, launcher, clock=clock)
    assert launcher.order == [(0, BASE)] and "base run failed" in trial.stopped


def test_budget_stops_before_a_round_that_would_not_fit() -> None:
    clock = FakeClock()
    launcher = FakeLauncher(clock, {BASE: 1.0, "a": 1.0})
    trial = run_trial(specs("a"), 10, launcher, clock=clock, budget_s=65.0)
    assert len(trial.runs) == 6  # rounds of 20 s: a fourth would end at 80 s
    assert "3 of 10 rounds" in trial.stopped.replace("round 3", "")


def test_ctrl_c_keeps_what_was_measured() -> None:
    clock = FakeClock()
    inner = FakeLauncher(clock, {BASE: 1.0, "a": 0.9})

    def launcher(spec: VariantSpec, round_index: int) -> VariantRun:
        if len(inner.order) == 5:
            raise KeyboardInterrupt
        return inner(spec, round_index)

    variants = specs("a")
    trial = run_trial(variants, 5, launcher, clock=clock)
    assert trial.interrupted and len(trial.runs) == 5
    result = summarize(("x.py",), variants, trial, Protocol())
    assert result.interrupted and result.fixes[0].comparison is not None
    assert result.fixes[0].comparison.num_rounds == 2
