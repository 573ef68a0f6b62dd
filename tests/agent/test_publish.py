"""Measurements as records: Cruise Control's bytes decode to the figures; impossible ones withheld."""

from __future__ import annotations

import math

import pyarrow as pa

from balancer import cruise_control as cc
from balancer.agent.measurement import BrokerMeasurement
from balancer.agent.publish import Limits, cruise_control_records


def test_records_decode_to_the_measured_figures_with_metric_topic_names():
    m = BrokerMeasurement(broker=3, ts=1_790_000_000_000)
    m.topic_rate(cc.TOPIC_BYTES_IN, "orders.v2", 1234.5)
    m.broker_value(cc.ALL_TOPIC_BYTES_IN, 1234.5)
    m.sizes[("orders.v2", 7)] = 4096.0
    records = cruise_control_records([m], Limits(max_rate=1e13, max_size=1e15))
    decoded = cc.decode(pa.array([value for _, value, _ in records], pa.binary())).to_pylist()
    got = {(r["metric_type"], r["topic"], r["partition"]): r["value"] for r in decoded}
    assert got == {
        (cc.ALL_TOPIC_BYTES_IN, None, None): 1234.5,
        (cc.TOPIC_BYTES_IN, "orders_v2", None): 1234.5,
        (cc.PARTITION_SIZE, "orders_v2", 7): 4096.0,
    }
    assert all(r["error"] is None and r["broker"] == 3 and r["ts"] == m.ts for r in decoded)
    assert [key for key, _, _ in records] == [b"3", b"orders_v2", b"3"]


def test_impossible_figures_are_withheld_and_counted():
    m = BrokerMeasurement(broker=1, ts=1_790_000_000_000)
    m.topic_rate(cc.TOPIC_BYTES_IN, "a", 2e13)  # above max_rate
    m.topic_rate(cc.TOPIC_BYTES_OUT, "a", math.nan)
    m.broker_value(cc.BROKER_CPU_UTIL, 1.5)  # a share of the cores above 1
    m.sizes[("a", 0)] = 2e15  # above max_size
    m.sizes[("a", 1)] = 10.0
    limits = Limits(max_rate=1e13, max_size=1e15)
    records = cruise_control_records([m], limits)
    assert len(records) == 1
    assert dict(limits.rejected) == {
        "TOPIC_BYTES_IN": 1,
        "TOPIC_BYTES_OUT": 1,
        "BROKER_CPU_UTIL": 1,
        "PARTITION_SIZE": 1,
    }
