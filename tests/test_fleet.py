"""Many clusters, one job: two simulated clusters share one topic; everything is computed per cluster."""

from __future__ import annotations

from collections import defaultdict

import pytest
from confluent_kafka import Producer
from support import job_config, simulated

from balancer import telemetry as tm
from balancer.spark import job
from balancer.spark.lakehouse import Lakehouse

pytestmark = pytest.mark.integration

T0 = 1_790_000_000_000 // 300_000 * 300_000  # a 5-minute window boundary


def test_two_clusters_on_one_topic_are_windowed_ranked_and_planned_separately(spark, broker, topic, tmp_path):
    # Different shapes so a cross-cluster mix-up shows: east has 4 brokers (one new, empty), west 6.
    east = simulated(topics=3, partitions_per_topic=(2, 3), new_empty_brokers=1, seed=21, cluster="east")
    west = simulated(
        brokers=6,
        racks=3,
        topics=4,
        partitions_per_topic=(4, 6),
        replication_factor=3,
        seed=22,
        cluster="west",
    )
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for minute in range(12):  # interleaved, as on a shared metrics topic
        for record in east.telemetry(T0 + minute * 60_000) + west.telemetry(T0 + minute * 60_000):
            producer.produce(
                topic, key=f"{record['cluster']}/{record['broker']}".encode(), value=tm.encode(record)
            )
    assert producer.flush(30) == 0

    config = job_config(tmp_path, broker.bootstrap_servers, topic)
    job.run_until_idle(spark, job.start(spark, config, once=True))
    lakehouse = Lakehouse(spark, config.lakehouse.path, engine="delta-rs")
    clusters = {"east": east, "west": west}
    own_partitions = {name: set(c.partitions) for name, c in clusters.items()}
    own_brokers = {name: set(c.brokers) for name, c in clusters.items()}

    # Loads: per (cluster, window) exactly that cluster's partitions and brokers.
    loads = defaultdict(set)
    for r in lakehouse.read("partition_load").collect():
        loads[(r["cluster"], r["window_end"])].add((r["topic"], r["partition"]))
    assert sorted({c for c, _ in loads}) == ["east", "west"] and len(loads) == 4
    for (name, _), found in loads.items():
        assert found == own_partitions[name]
    brokers = defaultdict(set)
    for r in lakehouse.read("broker_load").collect():
        brokers[(r["cluster"], r["window_end"])].add(r["broker"])
    for (name, _), found in brokers.items():
        assert found == own_brokers[name]

    # Rankings: ranks 1..n within each (cluster, window), n = that cluster's brokers.
    ranks = defaultdict(list)
    for r in lakehouse.read("broker_ranking").collect():
        ranks[(r["cluster"], r["window_end"])].append(
            (r["rank_by_traffic"], r["rank_by_partitions"], r["broker"])
        )
    assert len(ranks) == 4
    for (name, _), found in ranks.items():
        n = len(own_brokers[name])
        assert sorted(t for t, _, _ in found) == list(range(1, n + 1))
        assert sorted(p for _, p, _ in found) == list(range(1, n + 1))
        assert {b for _, _, b in found} == own_brokers[name]

    # Plans: one per (cluster, window); actions name only that cluster's partitions and brokers.
    plans = lakehouse.read("balance_plans").collect()
    assert sorted((p["cluster"], p["window_end"]) for p in plans) == sorted(loads)
    assert any(p["status"] == "proposed" for p in plans if p["cluster"] == "east"), [
        (p["cluster"], p["status"], p["reason"]) for p in plans
    ]  # its empty broker is a reason to move
    cluster_of = {p["plan_id"]: p["cluster"] for p in plans}
    actions = lakehouse.read("plan_actions").collect()
    assert actions
    for a in actions:
        name = cluster_of[a["plan_id"]]
        assert a["cluster"] == name
        assert (a["topic"], a["partition"]) in own_partitions[name], a
        assert set(a["old_replicas"]) | set(a["new_replicas"]) <= own_brokers[name], a


def fleet_frames(spark, names: list[str]):
    """partition_load / broker_load rows of small generated clusters, one window each."""
    import pandas as pd
    from test_planning import frames

    from balancer.demo.scenarios import ScenarioSpec, generate

    parts, brokers = [], []
    for i, name in enumerate(names):
        shape = dict(brokers=4, racks=0, topics=2, partitions_per_topic=(3, 4), replication_factor=2)
        prows, brows = frames(generate(ScenarioSpec(**shape, seed=i, cluster=name)), seed=i)
        prows["replicas"] = prows["replicas"].map(lambda r: [int(x) for x in r])
        parts.append(prows)
        brokers.append(brows)

    # Object columns, not pandas' Arrow-backed strings: concatenated, those are chunked arrays that
    # Spark's Arrow conversion refuses (it warns and falls back to the slow path).
    def plain(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.astype({c: object for c, t in frame.dtypes.items() if pd.api.types.is_string_dtype(t)})

    return tuple(spark.createDataFrame(plain(pd.concat(f, ignore_index=True))) for f in (parts, brokers))


def test_cluster_windows_are_planned_in_as_many_tasks_as_cores_whatever_the_shuffle_partitions(spark):
    """Planning parallelism follows the fleet, up to the cores Spark has: min(cluster windows, cores)
    tasks holding as many windows each (give or take one), with spark.sql.shuffle.partitions at 1
    (which used to put every window in one task)."""
    from collections import Counter

    from pyspark.sql import functions as F

    from balancer.config import BalancerConfig
    from balancer.spark.plan import planning

    names = [f"c{i}" for i in range(6)]
    cores = spark.sparkContext.defaultParallelism
    assert 1 < cores < len(names)  # the session's local[2]: fewer cores than windows, more than one
    partitions, brokers = fleet_frames(spark, names)
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    try:
        rows = (
            planning.plans(partitions, brokers, BalancerConfig())
            .select("cluster", "status", F.spark_partition_id().alias("task"))
            .collect()
        )
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    assert sorted(r["cluster"] for r in rows) == names
    assert all(r["status"] in ("proposed", "balanced", "unbalanced") for r in rows), rows
    per_task = Counter(r["task"] for r in rows)
    assert len(per_task) == cores, rows
    assert max(per_task.values()) - min(per_task.values()) <= 1, per_task


def test_slots_land_where_sparks_hash_partitioning_sends_them(spark):
    from pyspark.sql import functions as F

    from balancer.spark.plan.planning import _murmur3_long, partition_slots

    values = [0, 1, -1, 2**40 + 7, -(2**62), 123456789]
    spark_hashes = [
        r[0] for r in spark.createDataFrame([(v,) for v in values], "v long").select(F.hash("v")).collect()
    ]
    assert [_murmur3_long(v) for v in values] == spark_hashes
    for n in (1, 5, 64):
        slots = partition_slots(n)
        placed = spark.createDataFrame([(s,) for s in slots], "s long").repartition(n, "s")
        found = placed.select("s", F.spark_partition_id().alias("p")).collect()
        assert sorted((r["p"], r["s"]) for r in found) == list(enumerate(slots))
