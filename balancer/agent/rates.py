"""Counters to per-second rates, the way a missed scrape, a restart or a reset must not distort them.

A Kafka meter's ``Count`` only grows while its broker runs. The rate of an interval is
(count now - count before) / (time between the two readings), given only when:

- there is a reading before (the first reading of a series is its baseline: no rate);
- the two readings are at most ``max_gap_s`` apart: across a longer hole (missed scrapes, a broker
  that was down) the interval is not measured, it is a gap, never a zero and never a long average;
- the count did not go down: a lower count is a reset (a restarted broker, a recreated topic) and the
  interval is unknown, so it yields no rate rather than a negative one or a spike; the new count is the
  next baseline;
- the rate is physically possible (at most ``max_rate``).

Memory is bounded: at most ``max_series`` series are kept (the least recently updated goes first), and
:meth:`CounterRates.forget` drops the series not read for a while (deleted topics, moved partitions).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass


@dataclass
class RateCounts:
    """What became of the readings so far (cumulative)."""

    rates: int = 0
    baselines: int = 0  # first readings, and readings after a gap
    gaps: int = 0  # readings more than max_gap_s after the previous one
    resets: int = 0  # a count lower than the one before
    impossible: int = 0  # negative, non-finite, or a rate above max_rate
    evicted: int = 0  # series dropped to keep at most max_series


class CounterRates:
    def __init__(self, *, max_gap_s: float, max_rate: float, max_series: int):
        for name, value in (("max_gap_s", max_gap_s), ("max_rate", max_rate)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{name}: expected a number > 0, got {value!r}")
        if isinstance(max_series, bool) or not isinstance(max_series, int) or max_series < 1:
            raise ValueError(f"max_series: expected an integer >= 1, got {max_series!r}")
        self.max_gap_s = float(max_gap_s)
        self.max_rate = float(max_rate)
        self.max_series = max_series
        self.counts = RateCounts()
        self._last: OrderedDict[Hashable, tuple[float, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._last)

    def update(self, key: Hashable, value: float, at_s: float) -> float | None:
        """The rate since the previous reading of ``key`` (per second), or None when there is none."""
        if not math.isfinite(value) or value < 0 or not math.isfinite(at_s):
            self.counts.impossible += 1
            self._last.pop(key, None)
            return None
        previous = self._last.pop(key, None)
        self._last[key] = (value, at_s)
        if len(self._last) > self.max_series:
            self._last.popitem(last=False)
            self.counts.evicted += 1
        if previous is None:
            self.counts.baselines += 1
            return None
        before, then = previous
        elapsed = at_s - then
        if elapsed <= 0:
            self._last[key] = previous  # a reading not after the last one changes nothing
            return None
        if elapsed > self.max_gap_s:
            self.counts.gaps += 1
            return None
        if value < before:
            self.counts.resets += 1
            return None
        rate = (value - before) / elapsed
        if rate > self.max_rate:
            self.counts.impossible += 1
            return None
        self.counts.rates += 1
        return rate

    def forget(self, predicate) -> int:
        """Drop every series whose key satisfies ``predicate`` (a restarted broker's, a deleted topic's)."""
        doomed = [key for key in self._last if predicate(key)]
        for key in doomed:
            del self._last[key]
        return len(doomed)

    def forget_older_than(self, at_s: float) -> int:
        """Drop the series last read before ``at_s``."""
        return self.forget(lambda key: self._last[key][1] < at_s)
