"""Counters to rates: a gap is no rate, a reset is no rate (never negative, never a spike), memory bounded."""

from __future__ import annotations

import pytest

from balancer.agent.rates import CounterRates


def rates(**kw) -> CounterRates:
    return CounterRates(**{"max_gap_s": 15.0, "max_rate": 1e9, "max_series": 100, **kw})


def test_the_rate_is_the_counts_change_over_the_time_between_readings():
    r = rates()
    assert r.update("a", 1000.0, 100.0) is None  # the baseline
    assert r.update("a", 6000.0, 110.0) == pytest.approx(500.0)
    assert r.update("a", 6000.0, 120.0) == 0.0  # a counter that did not move: a measured zero
    assert r.counts.baselines == 1 and r.counts.rates == 2


def test_a_reading_after_a_hole_longer_than_max_gap_gives_no_rate_then_rates_resume():
    r = rates()
    r.update("a", 0.0, 0.0)
    assert r.update("a", 50_000.0, 40.0) is None  # 40 s > 15 s: the interval was not measured
    assert r.counts.gaps == 1
    assert r.update("a", 51_000.0, 50.0) == pytest.approx(100.0)


def test_a_count_that_went_down_is_a_reset_not_a_negative_rate():
    r = rates()
    r.update("a", 9_000_000.0, 0.0)
    assert r.update("a", 2_000.0, 10.0) is None  # the broker restarted: its count began again
    assert r.counts.resets == 1
    assert r.update("a", 7_000.0, 20.0) == pytest.approx(500.0)  # from the new baseline, no spike


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0])
def test_impossible_readings_give_no_rate(value):
    r = rates()
    r.update("a", 0.0, 0.0)
    assert r.update("a", value, 10.0) is None
    assert r.counts.impossible == 1


def test_a_rate_above_max_rate_is_withheld():
    r = rates(max_rate=1e6)
    r.update("a", 0.0, 0.0)
    assert r.update("a", 1e300, 10.0) is None
    assert r.counts.impossible == 1


def test_series_are_bounded_least_recently_read_first():
    r = rates(max_series=3)
    for i, key in enumerate("abcd"):
        r.update(key, 1.0, float(i))
    assert len(r) == 3 and r.counts.evicted == 1
    assert r.update("a", 2.0, 10.0) is None  # 'a' was evicted: a new baseline, not a rate (evicts 'b')
    assert r.update("d", 2.0, 10.0) is not None
    assert r.forget_older_than(9.0) == 1  # 'c', last read at 2 s
    assert len(r) == 2


@pytest.mark.parametrize(
    "kw, word",
    [({"max_gap_s": 0}, "max_gap_s"), ({"max_rate": -1}, "max_rate"), ({"max_series": 0}, "max_series")],
)
def test_arguments_are_checked_by_name(kw, word):
    with pytest.raises(ValueError, match=word):
        rates(**kw)
