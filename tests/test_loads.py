"""Load model and ranking as Spark transformations, on tiny inline data."""

from __future__ import annotations

from datetime import datetime

from balancer.config import BalancerConfig
from balancer.spark import loads

W0, W1 = datetime(2026, 1, 1, 0, 0), datetime(2026, 1, 1, 0, 5)
COLUMNS = ("cluster string, window_start timestamp, window_end timestamp, type string, broker int, topic string, "
           "partition int, bytes_in double, bytes_out double, messages_in double, size double, leader boolean, "
           "replicas array<int>, rack string, capacity_network_in double, capacity_network_out double, "
           "capacity_disk double, cpu double, last_ts timestamp, samples long")


def report(broker, topic, partition, replicas, leader, bytes_in, bytes_out, size=1e9):
    return ("c", W0, W1, "partition", broker, topic, partition, bytes_in, bytes_out if leader else 0.0, 1.0, size,
            leader, replicas, None, None, None, None, None, W1, 5)


def capacity(broker, rack="r"):
    return ("c", W0, W1, "broker", broker, None, None, None, None, None, None, None, None, rack,
            100e6, 200e6, 1e12, 0.2, W1, 5)


def replica_rows(partitions):
    rows = []
    for topic, partition, replicas, bytes_in, bytes_out in partitions:
        for broker in replicas:
            rows.append(report(broker, topic, partition, replicas, broker == replicas[0], bytes_in, bytes_out))
    return rows


def test_broker_hot_by_traffic_but_average_by_partition_count_ranks_first(spark):
    # Brokers 0-2 host 4 replicas each; broker 2 leads the one heavy partition.
    partitions = [("orders", 0, [2, 0], 30e6, 60e6)] + [
        (f"t{i}", i, replicas, 1e6, 1e6) for i, replicas in enumerate([[0, 1], [1, 2], [0, 1], [1, 2], [2, 0]])
    ]
    rows = replica_rows(partitions) + [capacity(b) for b in (0, 1, 2, 3)]
    replicas = spark.createDataFrame(rows, COLUMNS)
    brokers = loads.broker_load(loads.partition_load(replicas), replicas)
    ranking = {r["broker"]: r for r in loads.broker_ranking(brokers, BalancerConfig()).collect()}

    assert [ranking[b]["replicas"] for b in (0, 1, 2)] == [4, 4, 4]
    assert ranking[2]["rank_by_traffic"] == 1
    assert ranking[2]["rank_by_partitions"] == 3  # a tie on count, broken by id: nothing special
    assert ranking[2]["is_hot"]
    assert ranking[3]["replicas"] == 0 and ranking[3]["traffic"] == 0 and not ranking[3]["is_hot"]


def test_load_model_matches_cruise_control(spark):
    partitions = [("a", 0, [0, 1, 2], 10.0, 30.0), ("b", 0, [1, 2, 0], 4.0, 8.0)]
    rows = replica_rows(partitions) + [capacity(b) for b in (0, 1, 2)]
    replicas = spark.createDataFrame(rows, COLUMNS)
    brokers = {r["broker"]: r for r in loads.broker_load(loads.partition_load(replicas), replicas).collect()}
    assert brokers[0]["network_in"] == 14.0 and brokers[1]["network_in"] == 14.0
    # Leader out = consumers' bytes + bytes_in × (RF − 1) for replication.
    assert brokers[0]["network_out"] == 30.0 + 10.0 * 2
    assert brokers[1]["network_out"] == 8.0 + 4.0 * 2
    assert brokers[2]["network_out"] == 0.0
    assert brokers[0]["leaders"] == 1 and brokers[2]["leaders"] == 0
    assert brokers[0]["util_network_in"] == 14.0 / 100e6
