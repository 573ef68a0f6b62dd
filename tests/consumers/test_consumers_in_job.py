"""The streaming job with ``consumers.enabled``, on real Kafka: three real brokers carry both the metrics
topic (v1 telemetry stamped with the wall clock, as brokers stamp it) and a real consumer group (range over
two single-partition topics, each member its own confluent-kafka Consumer); the job's sink reads the group
at each micro-batch and, when the watermark closes the window, ranks and advises it from the window's
partition_load."""

from __future__ import annotations

import re
import time
import uuid

import pytest
from support import job_config, produce

from balancer import telemetry as tm
from balancer.consumers.admin import poll_groups
from balancer.consumers.model import AdviceKind, GroupState
from balancer.spark import job
from balancer.spark.lakehouse import Lakehouse, spark_schema
from consumers.kafka_groups import members, topic

pytestmark = pytest.mark.integration

CLUSTER = "e2e"
WINDOW_MS = 10_000


def telemetry(ts: int, topics: list[str]) -> list[dict]:
    """One report of three brokers, 1000 B/s (10 records/s) into each topic's single partition on broker 1."""
    brokers = [
        tm.broker_record(
            ts=ts, cluster=CLUSTER, broker=b, rack=None, network_in=1e8, network_out=1e8, disk=1e12
        )
        for b in (1, 2, 3)
    ]
    partitions = [
        tm.partition_record(
            ts=ts,
            cluster=CLUSTER,
            broker=1,
            topic=t,
            partition=0,
            leader=True,
            replicas=[1],
            bytes_in=1000.0,
            bytes_out=1000.0,
            messages_in=10.0,
            size=1e6,
        )
        for t in topics
    ]
    return brokers + partitions


def test_the_job_reads_the_groups_and_flags_a_skewed_one_in_the_window_it_closes(spark, kafka, tmp_path):
    # Topics made with a client held until they exist (see kafka_groups.topic).
    kafka_topic, topics = topic(kafka, 2), [topic(kafka, 1), topic(kafka, 1)]
    group = f"job-{uuid.uuid4().hex[:6]}"
    config = job_config(
        tmp_path,
        kafka.bootstrap_servers,
        kafka_topic,
        "windows.size=10 seconds",
        "windows.slide=10 seconds",
        "windows.watermark=1 second",
        "consumers.enabled=true",
        f"consumers.cluster={CLUSTER}",
        f"consumers.groups=^{group}$",
        "consumers.interval=1 second",
    )
    with members(kafka, group, topics, 2, **{"partition.assignment.strategy": "range"}):
        deadline, read = time.monotonic() + 60, None
        while time.monotonic() < deadline:
            found = poll_groups(kafka.bootstrap_servers, {}, CLUSTER, groups=re.compile(f"^{group}$")).groups
            read = found[0] if found else None
            if (
                read
                and read.state == GroupState.STABLE
                and sorted(len(m.partitions) for m in read.members) == [0, 2]
            ):
                break
            time.sleep(0.5)
        assert read is not None, "the group never formed"
        both = next(m for m in read.members if len(m.partitions) == 2)
        # Batch 0 lands an old report (it closes nothing) and reads the group at its start, at wall time R.
        produce(kafka.bootstrap_servers, kafka_topic, telemetry(int(time.time() * 1000) - 600_000, topics))
        job.run_until_idle(spark, job.start(spark, config, once=True))
        lakehouse = Lakehouse(spark, config.lakehouse.path, engine="delta-rs")
        (read_at,) = {r["observed_at"] for r in rows(lakehouse, "consumer_assignments", group)}
        # Batch 1 lands the report of R's window and one past its end: the watermark closes R's window.
        start = int(read_at.timestamp() * 1000) // WINDOW_MS * WINDOW_MS
        reports = telemetry(start + 1_000, topics) + telemetry(start + WINDOW_MS + 2_000, topics)
        produce(kafka.bootstrap_servers, kafka_topic, reports)
        job.run_until_idle(spark, job.start(spark, config, once=True))

    assert len({r["observed_at"] for r in rows(lakehouse, "consumer_assignments", group)}) == 2  # one a batch
    (closed,) = rows(lakehouse, "consumer_groups", group)
    assert int(closed["window_end"].timestamp() * 1000) == start + WINDOW_MS
    assert (
        closed["flagged"] and closed["bytes_per_sec"] == 2000.0 and closed["advice"] == ["range_multi_topic"]
    )
    (advised,) = rows(lakehouse, "consumer_advice", group)
    assert (advised["kind"], advised["member_id"]) == (AdviceKind.RANGE_MULTI_TOPIC, both.member_id)
    ranking = {r["member_id"]: r for r in rows(lakehouse, "consumer_ranking", group)}
    assert (
        ranking[both.member_id]["bytes_per_sec"] == 2000.0 and ranking[both.member_id]["rank_by_traffic"] == 1
    )


def rows(lakehouse: Lakehouse, table: str, group: str) -> list[dict]:
    return lakehouse.select(table, list(spark_schema(table).names), [("group_id", "=", group)]).to_pylist()
