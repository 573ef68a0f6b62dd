"""Measurements as metrics-topic records: Cruise Control's reporter format, or v1.

Cruise Control's (``balancer.cruise_control``'s encoder, byte for byte ``MetricSerde``): per broker its
BROKER metrics, a TOPIC metric per (metric, topic) it measured, and a PARTITION_SIZE per replica it hosts;
keys as the reporter's (the topic for topic metrics, the broker id otherwise), topic names as Kafka's metric
scopes spell them ('.' as '_').

v1 (``balancer.telemetry``): a partition record per replica, its rates the leader's topic rates of the
interval split evenly over the topic's partitions that broker leads (Cruise Control's own split), sent only
when the leader's rates are known this interval; a broker record per broker with its capacity from the
capacity file.

A figure that is physically impossible (negative, not finite, a rate above ``max_rate``, a size above
``max_size``, a CPU share above 1) is never published: it is counted in ``rejected``.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from balancer import cruise_control as cc
from balancer import telemetry as tm
from balancer.agent.measurement import BrokerMeasurement
from balancer.capacity import Capacities
from balancer.metadata import ClusterMetadata


def metric_topic(topic: str) -> str:
    return topic.replace(".", "_")


@dataclass
class Limits:
    max_rate: float
    max_size: float
    rejected: Counter[str] = field(default_factory=Counter)

    def ok(self, metric: int, value: float) -> bool:
        name = cc.RAW_METRIC_TYPES[metric].name
        if metric == cc.PARTITION_SIZE:
            bound = self.max_size
        elif metric == cc.BROKER_CPU_UTIL:
            bound = 1.0
        else:
            bound = self.max_rate
        if not (math.isfinite(value) and 0.0 <= value <= bound):
            self.rejected[name] += 1
            return False
        return True


def cruise_control_records(
    measurements: list[BrokerMeasurement], limits: Limits
) -> list[tuple[bytes, bytes, int]]:
    """(key, value, timestamp ms) per record."""
    out: list[tuple[bytes, bytes, int]] = []
    for m in measurements:
        key = str(m.broker).encode()
        for metric, value in sorted(m.broker_values.items()):
            if limits.ok(metric, value):
                out.append((key, cc.encode_broker_metric(metric, m.ts, m.broker, value), m.ts))
        for (metric, topic), value in sorted(m.topic_rates.items()):
            if limits.ok(metric, value):
                name = metric_topic(topic)
                out.append((name.encode(), cc.encode_topic_metric(metric, m.ts, m.broker, name, value), m.ts))
        for (topic, partition), size in sorted(m.sizes.items()):
            if limits.ok(cc.PARTITION_SIZE, size):
                value = cc.encode_partition_metric(
                    cc.PARTITION_SIZE, m.ts, m.broker, metric_topic(topic), partition, size
                )
                out.append((key, value, m.ts))
    return out


def v1_records(
    measurements: list[BrokerMeasurement],
    metadata: ClusterMetadata,
    capacities: Capacities,
    limits: Limits,
) -> list[dict]:
    by_broker = {m.broker: m for m in measurements}
    led: Counter[tuple[int, str]] = Counter()
    for p in metadata.partitions:
        if p.leader is not None:
            led[(p.leader, p.topic)] += 1
    leaders = {(p.topic, p.partition): p for p in metadata.partitions}
    out: list[dict] = []
    for m in measurements:
        for (topic, partition), size in sorted(m.sizes.items()):
            p = leaders.get((topic, partition))
            if (
                p is None
                or p.leader is None
                or m.broker not in p.replicas
                or not limits.ok(cc.PARTITION_SIZE, size)
            ):
                continue
            source = by_broker.get(p.leader)
            if source is None:
                continue
            rates = [
                source.topic_rates.get((metric, topic))
                for metric in (cc.TOPIC_BYTES_IN, cc.TOPIC_BYTES_OUT, cc.TOPIC_MESSAGES_IN_PER_SEC)
            ]
            if any(r is None for r in rates) or not all(
                limits.ok(metric, r)
                for metric, r in zip(
                    (cc.TOPIC_BYTES_IN, cc.TOPIC_BYTES_OUT, cc.TOPIC_MESSAGES_IN_PER_SEC), rates
                )
            ):
                continue
            share = led[(p.leader, topic)]
            bytes_in, bytes_out, messages_in = (float(r) / share for r in rates)  # type: ignore[arg-type]
            out.append(
                tm.partition_record(
                    ts=m.ts,
                    cluster=metadata.cluster,
                    broker=m.broker,
                    topic=topic,
                    partition=partition,
                    leader=p.leader == m.broker,
                    replicas=list(p.replicas),
                    bytes_in=bytes_in,
                    bytes_out=bytes_out,
                    messages_in=messages_in,
                    size=size,
                )
            )
        capacity = capacities.for_broker(m.broker)
        if capacity is None:
            limits.rejected["broker without a capacity in capacity.path"] += 1
            continue
        cpu = m.broker_values.get(cc.BROKER_CPU_UTIL)
        out.append(
            tm.broker_record(
                ts=m.ts,
                cluster=metadata.cluster,
                broker=m.broker,
                rack=metadata.brokers.get(m.broker),
                network_in=capacity.network_in,
                network_out=capacity.network_out,
                disk=capacity.disk,
                cpu=cpu if cpu is not None and limits.ok(cc.BROKER_CPU_UTIL, cpu) else None,
            )
        )
    return out
