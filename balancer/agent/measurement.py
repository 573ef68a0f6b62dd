"""What one broker's interval holds, in Cruise Control's terms, and the counts of what could not be used.

Rates are bytes (or messages, requests) per second measured over the interval; a figure the source could
not measure this interval is absent, never zero. Topic names are Kafka's own (the publisher writes them as
the reporter does, '.' as '_').
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

from balancer import cruise_control as cc

# Distinct reasons / names kept in a Problems counter; the rest are summed under "(other)" (bounded memory).
MAX_KINDS = 50


@dataclass
class BrokerMeasurement:
    broker: int
    ts: int  # epoch ms of the reading
    # (RawMetricType id of a TOPIC metric, topic) -> rate
    topic_rates: dict[tuple[int, str], float] = field(default_factory=dict)
    # RawMetricType id of a BROKER metric -> value
    broker_values: dict[int, float] = field(default_factory=dict)
    # (topic, partition) -> bytes of this broker's replica
    sizes: dict[tuple[str, int], float] = field(default_factory=dict)

    def topic_rate(self, metric: int, topic: str, value: float) -> None:
        if cc.RAW_METRIC_TYPES[metric].scope != "topic":
            raise ValueError(f"metric: {cc.RAW_METRIC_TYPES[metric].name} is not a topic metric")
        self.topic_rates[(metric, topic)] = value

    def broker_value(self, metric: int, value: float) -> None:
        if cc.RAW_METRIC_TYPES[metric].scope != "broker":
            raise ValueError(f"metric: {cc.RAW_METRIC_TYPES[metric].name} is not a broker metric")
        self.broker_values[metric] = value

    @property
    def empty(self) -> bool:
        return not (self.topic_rates or self.broker_values or self.sizes)


class Problems:
    """Counts by reason, at most MAX_KINDS distinct reasons (the rest under '(other)')."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, reason: str, n: int = 1) -> None:
        if reason not in self.counts and len(self.counts) >= MAX_KINDS:
            reason = "(other)"
        self.counts[reason] += n

    def total(self) -> int:
        return sum(self.counts.values())

    def summary(self, top: int = 5) -> str:
        return ", ".join(f"{reason}: {n}" for reason, n in self.counts.most_common(top))


class RoundTrips:
    """The latest ``keep`` scrape round trips (seconds): what the agent's timing rule (a scrape is placed at
    the middle of its round trip, and one slower than the skew bound times no rate) meets in practice."""

    def __init__(self, keep: int = 1000) -> None:
        self.recent: deque[float] = deque(maxlen=keep)

    def add(self, seconds: float) -> None:
        self.recent.append(seconds)

    def summary(self) -> str:
        """``p50 12 ms, max 340 ms over the last 1000 scrapes``; empty before the first."""
        if not self.recent:
            return ""
        ordered = sorted(self.recent)
        p50 = ordered[(len(ordered) - 1) // 2]
        slowest = ordered[-1]
        return f"p50 {p50 * 1000:.0f} ms, max {slowest * 1000:.0f} ms over the last {len(ordered)} scrapes"
