"""Measurements as records: Cruise Control's bytes decode to the figures; impossible ones withheld."""

from __future__ import annotations

import math

import pyarrow as pa

from balancer import cruise_control as cc
from balancer.agent.measurement import BrokerMeasurement
from balancer.agent.publish import Limits, cruise_control_records, v1_records


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


def test_v1_records_split_the_leaders_topic_rate_and_skip_partitions_whose_leader_was_not_measured():
    from balancer import telemetry as tm
    from balancer.capacity import parse_capacities
    from balancer.metadata import ClusterMetadata, PartitionInfo

    metadata = ClusterMetadata(
        cluster="prod",
        brokers={1: "r1", 2: "r2", 3: "r3"},
        partitions=(
            PartitionInfo("t", 0, (1, 2), 1, (1, 2)),
            PartitionInfo("t", 1, (1, 2), 1, (1, 2)),
            PartitionInfo("u", 0, (3, 2), 3, (3, 2)),  # led by broker 3, which has no measurement
        ),
    )
    capacities = parse_capacities(
        {
            "brokerCapacities": [
                {"brokerId": "-1", "capacity": {"DISK": "1", "CPU": "100", "NW_IN": "1", "NW_OUT": "1"}}
            ]
        }
    )
    leader = BrokerMeasurement(broker=1, ts=1_790_000_000_000, sizes={("t", 0): 10.0, ("t", 1): 20.0})
    for metric, value in (
        (cc.TOPIC_BYTES_IN, 100.0),
        (cc.TOPIC_BYTES_OUT, 50.0),
        (cc.TOPIC_MESSAGES_IN_PER_SEC, 4.0),
    ):
        leader.topic_rate(metric, "t", value)
    follower = BrokerMeasurement(broker=2, ts=1_790_000_000_000, sizes={("t", 0): 10.0, ("u", 0): 5.0})
    records = v1_records([leader, follower], metadata, capacities, Limits(max_rate=1e13, max_size=1e15))
    partitions = {(r["broker"], r["topic"], r["partition"]): r for r in records if r["type"] == "partition"}
    assert set(partitions) == {(1, "t", 0), (1, "t", 1), (2, "t", 0)}  # u-0: its leader's rates unknown
    assert partitions[(1, "t", 0)]["bytes_in"] == 50.0 and partitions[(1, "t", 1)]["bytes_out"] == 25.0
    assert partitions[(2, "t", 0)]["leader"] is False and partitions[(2, "t", 0)]["replicas"] == [1, 2]
    brokers = {r["broker"]: r for r in records if r["type"] == "broker"}
    assert brokers[2]["rack"] == "r2" and brokers[2]["capacity"]["network_in"] == 1024.0
    assert all(tm.encode(r) for r in records)
