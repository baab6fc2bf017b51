"""Which step signals count: property tests of StepPolicy against a direct count."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aiprof.capture.steps import StepPolicy

SIGNALS = st.lists(st.one_of(
    st.tuples(st.just("optimizer"), st.sampled_from(["adam", "sgd"])),
    st.tuples(st.just("user"), st.none()),
    st.tuples(st.just("named"), st.none()),
), max_size=40)


def expected_count(signals: list[tuple[str, str | None]], steps_from: str | None) -> int:
    if steps_from:
        return sum(1 for source, _ in signals if source == "named")
    optimizers = [opt for source, opt in signals if source == "optimizer"]
    first = optimizers[0] if optimizers else None
    count, explicit, by_optimizer = 0, False, False
    for source, opt in signals:
        if source == "user":
            if explicit or not by_optimizer:  # the switch-over closes no new step
                count += 1
            explicit = True
        elif source == "optimizer" and not explicit and opt == first:
            count += 1
            by_optimizer = True
    return count


@given(SIGNALS, st.sampled_from([None, "train_step"]))
def test_counted_steps_match_a_direct_count(signals, steps_from):
    policy = StepPolicy(steps_from)
    optimizers = {"adam": object(), "sgd": object()}
    accepted = sum(policy.accept(source, optimizers.get(opt or "")) for source, opt in signals)
    assert accepted == expected_count(signals, steps_from)


@given(SIGNALS)
def test_user_steps_are_never_dropped_when_they_are_the_only_source(signals):
    policy = StepPolicy(None)
    users = [policy.accept(source, object()) for source, _ in signals if source == "user"]
    assert all(users)


def test_optimizer_then_user_steps_make_one_step_per_iteration():
    """``opt.step(); aiprof.step()`` in a loop: one boundary per iteration, no empty one."""
    policy, adam = StepPolicy(None), object()
    boundaries = []
    for _ in range(4):
        boundaries.append(policy.accept("optimizer", adam) + policy.accept("user"))
    assert boundaries == [1, 1, 1, 1]
    assert policy.source == "user"
