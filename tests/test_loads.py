"""Load model and ranking as Spark transformations, on tiny inline data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from rows import WINDOW_COLUMNS, window_row

from balancer.config import BalancerConfig
from balancer.spark.windows import loads

pytestmark = pytest.mark.integration  # every test runs Spark

W0, W1 = datetime(2026, 1, 1, 0, 0), datetime(2026, 1, 1, 0, 5)


def report(broker, topic, partition, replicas, leader, bytes_in, bytes_out, size=1e9):
    return window_row(
        cluster="c",
        window_start=W0,
        window_end=W1,
        type="partition",
        broker=broker,
        topic=topic,
        partition=partition,
        bytes_in=bytes_in,
        bytes_out=bytes_out if leader else 0.0,
        messages_in=1.0,
        size=size,
        leader=leader,
        replicas=replicas,
        last_ts=W1,
        samples=5,
    )


def capacity(broker, rack="r"):
    return window_row(
        cluster="c",
        window_start=W0,
        window_end=W1,
        type="broker",
        broker=broker,
        rack=rack,
        capacity_network_in=100e6,
        capacity_network_out=200e6,
        capacity_disk=1e12,
        cpu=0.2,
        last_ts=W1,
        samples=5,
    )


def replica_rows(partitions):
    rows = []
    for topic, partition, replicas, bytes_in, bytes_out in partitions:
        for broker in replicas:
            rows.append(
                report(broker, topic, partition, replicas, broker == replicas[0], bytes_in, bytes_out)
            )
    return rows


def test_broker_hot_by_traffic_but_average_by_partition_count_ranks_first(spark):
    # Brokers 0-2 host 4 replicas each; broker 2 leads the one heavy partition.
    partitions = [("orders", 0, [2, 0], 30e6, 60e6)] + [
        (f"t{i}", i, replicas, 1e6, 1e6)
        for i, replicas in enumerate([[0, 1], [1, 2], [0, 1], [1, 2], [2, 0]])
    ]
    rows = replica_rows(partitions) + [capacity(b) for b in (0, 1, 2, 3)]
    replicas = spark.createDataFrame(rows, WINDOW_COLUMNS)
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
    replicas = spark.createDataFrame(rows, WINDOW_COLUMNS)
    brokers = {r["broker"]: r for r in loads.broker_load(loads.partition_load(replicas), replicas).collect()}
    assert brokers[0]["network_in"] == 14.0 and brokers[1]["network_in"] == 14.0
    # Leader out = consumers' bytes + bytes_in × (RF − 1) for replication.
    assert brokers[0]["network_out"] == 30.0 + 10.0 * 2
    assert brokers[1]["network_out"] == 8.0 + 4.0 * 2
    assert brokers[2]["network_out"] == 0.0
    assert brokers[0]["leaders"] == 1 and brokers[2]["leaders"] == 0
    assert brokers[0]["util_network_in"] == 14.0 / 100e6


def test_replica_windows_close_only_the_windows_ending_in_the_range_with_sliding_windows(spark):
    from balancer.config import WindowsConfig
    from balancer.spark.lakehouse import spark_schema

    # One partition replica reporting every minute 0..6 with bytes_in = minute, plus one late row.
    base = int(W0.replace(tzinfo=UTC).timestamp() * 1000)
    names = spark_schema("telemetry_raw").names
    rows = []
    for minute in range(7):
        row = {name: None for name in names}
        row.update(
            kafka_topic="m",
            kafka_partition=0,
            kafka_offset=minute,
            v=1,
            type="partition",
            cluster="c",
            broker=1,
            topic="t",
            partition=0,
            leader=True,
            replicas=[1, 2],
            bytes_in=float(minute),
            bytes_out=2.0 * minute,
            messages_in=1.0,
            size=1e9 + minute,
            is_late=False,
        )
        row["ts"] = W0 + timedelta(minutes=minute)
        rows.append(tuple(row[name] for name in names))
    raw = spark.createDataFrame(rows, spark_schema("telemetry_raw"))
    sliding = WindowsConfig(size="3 minutes", slide="1 minute", watermark="1 minute")

    # Windows ending in (minute 3, minute 5]: [1,4) and [2,5).
    got = loads.replica_windows(
        raw, sliding, ends_after_ms=base + 3 * 60_000, ends_until_ms=base + 5 * 60_000
    )
    by_start = {
        int(r["window_start"].replace(tzinfo=UTC).timestamp() * 1000 - base) // 60_000: r
        for r in got.collect()
    }
    assert sorted(by_start) == [1, 2]
    assert by_start[1]["bytes_in"] == 2.0 and by_start[1]["samples"] == 3  # minutes 1, 2, 3
    assert by_start[2]["bytes_in"] == 3.0 and by_start[2]["size"] == 1e9 + 4  # the latest report wins
    # No lower end (the first batch): every window ending by minute 2, including the partial ones.
    first = loads.replica_windows(raw, sliding, ends_after_ms=None, ends_until_ms=base + 2 * 60_000)
    assert sorted(
        int(r["window_end"].replace(tzinfo=UTC).timestamp() * 1000 - base) // 60_000 for r in first.collect()
    ) == [1, 2]


def _raw(rows: list[dict]):
    """telemetry_raw rows from partial dicts (the rest NULL, on time)."""
    from balancer.spark.lakehouse import spark_schema

    schema = spark_schema("telemetry_raw")
    full = []
    for offset, row in enumerate(rows):
        values = {name: None for name in schema.names}
        values.update(
            kafka_topic="m", kafka_partition=0, kafka_offset=offset, v=1, cluster="c", is_late=False, **row
        )
        full.append(tuple(values[name] for name in schema.names))
    return full, schema


def _churning_window(spark):
    """One 5-minute window from raw reports, every minute:

    - t-0 moves from [1, 2, 3] to [1, 2, 4] at minute 3: broker 3 reports minutes 0-2 with the old list,
      broker 4 minutes 3-4 with the new one; broker 1 leads throughout, its bytes in growing;
    - t-1 on [2, 3]: its leader, broker 2, never reports it; broker 3 follows, at 7 bytes/s in;
    - brokers 1-4 report capacity every minute; broker 5 too, but hosts nothing and moves from
      rack a to b at minute 2.
    """
    from balancer.config import WindowsConfig

    rows = []
    for minute in range(5):
        ts = W0 + timedelta(minutes=minute)
        moved = minute >= 3
        t0 = [1, 2, 4] if moved else [1, 2, 3]
        for broker in t0:
            rows.append(
                dict(
                    type="partition",
                    ts=ts,
                    broker=broker,
                    topic="t",
                    partition=0,
                    replicas=t0,
                    leader=broker == 1,
                    bytes_in=10.0 + minute if broker == 1 else 1.0,
                    bytes_out=30.0 if broker == 1 else 0.0,
                    messages_in=1.0,
                    size=1e9 + minute,
                )
            )
        rows.append(
            dict(
                type="partition",
                ts=ts,
                broker=3,
                topic="t",
                partition=1,
                replicas=[2, 3],
                leader=False,
                bytes_in=7.0,
                bytes_out=0.0,
                messages_in=1.0,
                size=5e8,
            )
        )
        for broker in (1, 2, 3, 4, 5):
            rows.append(
                dict(
                    type="broker",
                    ts=ts,
                    broker=broker,
                    rack=("a" if minute < 2 else "b") if broker == 5 else "r",
                    cpu=0.1 * minute,
                    capacity_network_in=100.0,
                    capacity_network_out=200.0,
                    capacity_disk=1e12,
                )
            )
    full, schema = _raw(rows)
    base = int(W0.replace(tzinfo=UTC).timestamp() * 1000)
    tumbling = WindowsConfig(size="5 minutes", slide="5 minutes", watermark="1 minute")
    return loads.replica_windows(
        spark.createDataFrame(full, schema), tumbling, ends_after_ms=None, ends_until_ms=base + 5 * 60_000
    )


def test_samples_of_a_window_aggregate_per_replica_and_per_partition(spark):
    windows = _churning_window(spark).cache()
    replica = {(r["type"], r["broker"], r["topic"], r["partition"]): r for r in windows.collect()}
    leader = replica[("partition", 1, "t", 0)]
    assert leader["samples"] == 5 and leader["bytes_in"] == 12.0  # the mean of 10..14
    assert leader["size"] == 1e9 + 4 and leader["replicas"] == [1, 2, 4]  # the latest report's
    assert replica[("partition", 3, "t", 0)]["replicas"] == [1, 2, 3]  # it stopped reporting before the move
    assert replica[("partition", 3, "t", 0)]["samples"] == 3
    moved_in = replica[("broker", 5, None, None)]
    assert moved_in["rack"] == "b" and moved_in["samples"] == 5 and abs(moved_in["cpu"] - 0.2) < 1e-12

    partitions = {(r["topic"], r["partition"]): r for r in loads.partition_load(windows).collect()}
    moved = partitions[("t", 0)]
    assert moved["replicas"] == [1, 2, 4] and moved["replication_factor"] == 3 and moved["leader"] == 1
    assert (moved["bytes_in"], moved["bytes_out"], moved["size"]) == (12.0, 30.0, 1e9 + 4)
    assert moved["samples"] == 5 + 5 + 3 + 2 and moved["reporting_replicas"] == 4
    silent = partitions[("t", 1)]
    # The leader never reported: the follower's bytes in, no bytes out, the list's first broker leads.
    assert (silent["leader"], silent["bytes_in"], silent["bytes_out"], silent["size"]) == (2, 7.0, 0.0, 5e8)

    brokers = {r["broker"]: r for r in loads.broker_load(loads.partition_load(windows), windows).collect()}
    assert brokers[5]["replicas"] == 0 and brokers[5]["rack"] == "b" and brokers[5]["capacity_disk"] == 1e12
    assert brokers[3]["replicas"] == 1 and brokers[3]["network_in"] == 7.0  # t-1 only: t-0 moved away
    assert brokers[1]["network_out"] == 30.0 + 12.0 * 2


def test_windows_contract_counts_replicas_against_the_latest_lists(spark, tmp_path):
    from balancer.config import QualityConfig
    from balancer.spark.contract.quality import Contract
    from balancer.spark.lakehouse import Lakehouse

    windows = _churning_window(spark).cache()
    lakehouse = Lakehouse(spark, tmp_path / "lakehouse", engine="delta-rs")
    lakehouse.create_all()
    checks = Contract(lakehouse, QualityConfig()).broker_checks(windows, loads.partition_load(windows))
    got = {
        r.broker: (
            r.hosted_replicas,
            r.unreported_replicas,
            r.capacity_reports,
            r.coverage,
            r.report_age_seconds,
        )
        for r in checks.itertuples()
    }
    # Broker 2 never reported t-1, which it leads; broker 3's old t-0 reports count for nothing it hosts.
    assert got == {
        1: (1, 0, 5, 1.0, 60.0),
        2: (2, 1, 5, 1.0, 60.0),
        3: (1, 0, 5, 1.0, 60.0),
        4: (1, 0, 5, 1.0, 60.0),
        5: (0, 0, 5, 1.0, 60.0),
    }


def test_partition_load_reuses_the_windows_shuffle_and_sort(spark, capsys):
    windows = _churning_window(spark).cache()
    windows.count()
    loads.partition_load(windows).explain()
    plan = capsys.readouterr().out
    own = plan[: plan.index("InMemoryRelation")]  # what partition_load adds above the cached windows
    assert "InMemoryTableScan" in own and "Exchange" not in own and "Sort [" not in own, plan
