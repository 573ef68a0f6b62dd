"""Consumer-side balance on real Kafka: three real brokers (the ``kafka`` fixture), real consumer groups
(each member its own confluent-kafka Consumer, in its own thread), the job's ``ConsumerLog`` reading them
through the Admin API into Delta tables on disk, and closing windows from ``partition_load`` rows as the
job's sink hands them over (a real Spark DataFrame; the byte rates are what the test produced)."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import Consumer, TopicPartition

from balancer.cli.sql import register_sql_views
from balancer.config import load_config
from balancer.consumers.model import AdviceKind, GroupState
from balancer.spark.lakehouse import Lakehouse, spark_schema
from balancer.spark.land.consumers import ConsumerLog
from consumers.kafka_groups import Member, members, produce, topic

pytestmark = pytest.mark.integration

CLUSTER = "real"


@pytest.fixture
def log_and_lakehouse(kafka, spark, tmp_path):
    config = load_config(
        None,
        [
            f"lakehouse.path={tmp_path / 'lakehouse'}",
            "lakehouse.engine=delta-rs",
            "windows.size=10 seconds",
            "windows.slide=10 seconds",
            "windows.watermark=1 second",
            "consumers.enabled=true",
            f"consumers.cluster={CLUSTER}",
            f"consumers.bootstrap_servers={kafka.bootstrap_servers}",
            "consumers.interval=1 second",
        ],
    )
    lakehouse = Lakehouse(spark, config.lakehouse.path, engine="delta-rs")
    lakehouse.create_all()
    return ConsumerLog(lakehouse, config), lakehouse


_BATCH_IDS = itertools.count(1)


class Batches:
    """Batch ids for the log's idempotent appends, increasing as the sink's micro-batches' do (one sequence
    for the process, so tests sharing a lakehouse never reuse an id its appends already committed)."""

    def __call__(self) -> int:
        return next(_BATCH_IDS)


def read_until(log: ConsumerLog, batch: Batches, group: str, done, timeout: float = 60.0):
    """Read the groups (landing each read) until the group is stable and ``done(its members)`` holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        snapshot = log.read()  # the read landed is the read checked
        log.land(snapshot, app_id="test", batch_id=batch())
        found = [g for g in snapshot.groups if g.group_id == group]
        if found and found[0].state == GroupState.STABLE and done(found[0].members):
            return found[0]
        time.sleep(0.5)
    raise AssertionError(f"group {group} did not settle: {found}")


def partition_load(spark, start: datetime, end: datetime, rates: dict[tuple[str, int], tuple[float, float]]):
    """partition_load rows of one window: (bytes/s, records/s) per partition."""
    rows = [
        {
            "cluster": CLUSTER,
            "window_start": start,
            "window_end": end,
            "topic": t,
            "partition": p,
            "leader": 1,
            "replicas": [1],
            "replication_factor": 1,
            "bytes_in": b,
            "bytes_out": b,
            "messages_in": m,
            "size": 0.0,
            "samples": 1,
            "reporting_replicas": 1,
        }
        for (t, p), (b, m) in rates.items()
    ]
    return spark.createDataFrame(rows, spark_schema("partition_load"))


def table(lakehouse: Lakehouse, name: str, group: str) -> list[dict]:
    return lakehouse.select(name, list(spark_schema(name).names), [("group_id", "=", group)]).to_pylist()


def window_now() -> tuple[datetime, datetime]:
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
    return start, start + timedelta(minutes=5)


def test_one_partition_carrying_most_bytes_flags_its_consumer_and_ranks_it_first_by_traffic_not_count(
    kafka, spark, log_and_lakehouse
):
    log, lakehouse = log_and_lakehouse
    batch, name, group = Batches(), topic(kafka, 4), f"hot-{uuid.uuid4().hex[:6]}"
    start, end = window_now()
    with members(kafka, group, [name], 3, **{"partition.assignment.strategy": "range"}):
        settled = read_until(log, batch, group, lambda ms: sorted(len(m.partitions) for m in ms) == [1, 1, 2])
        # The hot partition goes to a member holding one partition: by count another member leads.
        owner = next(m for m in settled.members if len(m.partitions) == 1)
        busiest_by_count = next(m for m in settled.members if len(m.partitions) == 2)
        hot = owner.partitions[0][1]
        counts = {p: (200 if p == hot else 10) for p in range(4)}
        produce(kafka, name, counts, size=500)
        read_until(log, batch, group, lambda ms: True)
    window = 300.0
    rates = {(name, p): (n * 500 / window, n / window) for p, n in counts.items()}
    log.close_windows(partition_load(spark, start, end, rates), app_id="test", batch_id=batch())

    ranking = {r["client_id"]: r for r in table(lakehouse, "consumer_ranking", group)}
    assert ranking[owner.client_id]["rank_by_traffic"] == 1
    assert ranking[owner.client_id]["rank_by_partitions"] != 1
    assert ranking[busiest_by_count.client_id]["rank_by_partitions"] == 1
    assert ranking[busiest_by_count.client_id]["rank_by_traffic"] != 1
    assert ranking[owner.client_id]["bytes_per_sec"] == pytest.approx(200 * 500 / window)
    assert ranking[owner.client_id]["is_hot"]
    (groups,) = table(lakehouse, "consumer_groups", group)
    assert groups["flagged"] and groups["traffic_skew"] > 1.5 and groups["assignor"] == "range"
    advice = table(lakehouse, "consumer_advice", group)
    assert [(a["kind"], a["client_id"], a["topic"], a["partition"]) for a in advice] == [
        (AdviceKind.HOT_PARTITION, owner.client_id, name, hot)
    ]

    # The saved views show the same: both ranks side by side, and the advice with its group's skew.
    lakehouse.register_views()
    register_sql_views(spark)
    shown = spark.sql(
        "SELECT client_id, rank_by_traffic, rank_by_partitions FROM latest_consumer_ranking "
        f"WHERE group_id = '{group}'"
    ).collect()
    assert {r.client_id: (r.rank_by_traffic, r.rank_by_partitions) for r in shown} == {
        c: (r["rank_by_traffic"], r["rank_by_partitions"]) for c, r in ranking.items()
    }
    (advised,) = spark.sql(f"SELECT * FROM consumer_advice_history WHERE group_id = '{group}'").collect()
    assert (advised.kind, advised.client_id, advised.traffic_skew) == (
        "hot_partition",
        owner.client_id,
        round(groups["traffic_skew"], 2),
    )


def test_range_over_two_topics_is_flagged_naming_the_member_with_both_and_an_even_group_is_not(
    kafka, spark, log_and_lakehouse
):
    log, lakehouse = log_and_lakehouse
    batch = Batches()
    first, second, even_topic = topic(kafka, 1), topic(kafka, 1), topic(kafka, 4)
    skewed, even = f"range-{uuid.uuid4().hex[:6]}", f"even-{uuid.uuid4().hex[:6]}"
    start, end = window_now()
    with (
        members(kafka, skewed, [first, second], 2, **{"partition.assignment.strategy": "range"}),
        members(kafka, even, [even_topic], 2, **{"group.protocol": "consumer"}),
    ):
        ranged = read_until(log, batch, skewed, lambda ms: sorted(len(m.partitions) for m in ms) == [0, 2])
        read_until(log, batch, even, lambda ms: len(ms) == 2 and all(len(m.partitions) == 2 for m in ms))
    both = next(m for m in ranged.members if len(m.partitions) == 2)
    rates = {
        (t, p): (1000.0, 10.0) for t, p in [(first, 0), (second, 0)] + [(even_topic, p) for p in range(4)]
    }
    log.close_windows(partition_load(spark, start, end, rates), app_id="test", batch_id=batch())

    (skewed_row,) = table(lakehouse, "consumer_groups", skewed)
    assert skewed_row["flagged"] and skewed_row["advice"] == [AdviceKind.RANGE_MULTI_TOPIC]
    (advice,) = table(lakehouse, "consumer_advice", skewed)
    assert (advice["kind"], advice["client_id"], advice["member_id"]) == (
        AdviceKind.RANGE_MULTI_TOPIC,
        both.client_id,
        both.member_id,
    )
    (even_row,) = table(lakehouse, "consumer_groups", even)
    assert even_row["group_protocol"] == "consumer" and even_row["traffic_skew"] == pytest.approx(1.0)
    assert not even_row["flagged"] and even_row["advice"] == []
    assert table(lakehouse, "consumer_advice", even) == []


def test_lag_is_end_offset_minus_committed_offset_as_kafka_reports_them(kafka, spark, log_and_lakehouse):
    log, lakehouse = log_and_lakehouse
    batch, name, group = Batches(), topic(kafka, 2), f"lag-{uuid.uuid4().hex[:6]}"
    produce(kafka, name, {0: 40, 1: 40}, size=100)
    start, end = window_now()
    with members(kafka, group, [name], 2, commit_below=15):
        read_until(log, batch, group, lambda ms: len(ms) == 2 and all(len(m.partitions) == 1 for m in ms))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not _committed_both(kafka, group, name, 15):
            time.sleep(0.3)
        produce(kafka, name, {0: 7, 1: 3}, size=100)  # lag grows after the commits stopped
        read_until(log, batch, group, lambda ms: True)
        committed, ends = _independently(kafka, group, name)
    log.close_windows(
        partition_load(spark, start, end, {(name, p): (100.0, 1.0) for p in (0, 1)}),
        app_id="test",
        batch_id=batch(),
    )
    lag = {r["partition"]: r for r in table(lakehouse, "consumer_lag", group)}
    assert committed == {0: 15, 1: 15} and ends == {0: 47, 1: 43}
    for p in (0, 1):
        assert lag[p]["committed_offset"] == committed[p] and lag[p]["end_offset"] == ends[p]
        assert lag[p]["lag_records"] == ends[p] - committed[p]
        assert lag[p]["lag_bytes"] == pytest.approx((ends[p] - committed[p]) * 100.0)
    latest = max(r["observed_at"] for r in table(lakehouse, "consumer_assignments", group))
    landed = {
        r["partition"]: r["lag"]
        for r in table(lakehouse, "consumer_assignments", group)
        if r["observed_at"] == latest
    }
    assert landed == {p: ends[p] - committed[p] for p in (0, 1)}


def _committed_both(kafka, group: str, name: str, offset: int) -> bool:
    committed, _ = _independently(kafka, group, name)
    return committed == {0: offset, 1: offset}


def _independently(kafka, group: str, name: str) -> tuple[dict[int, int], dict[int, int]]:
    """Committed offsets (OffsetFetch through a consumer that never joins) and high watermarks (ListOffsets
    by the consumer API), not through the Admin calls the job makes."""
    reader = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group, "log_level": 0})
    try:
        committed = {
            tp.partition: tp.offset
            for tp in reader.committed([TopicPartition(name, p) for p in (0, 1)], timeout=10)
        }
        ends = {p: reader.get_watermark_offsets(TopicPartition(name, p), timeout=10)[1] for p in (0, 1)}
    finally:
        reader.close()
    return committed, ends


class Restarter:
    """Closes a group's member ``client_id`` and starts it again every ``every`` seconds (a crash-looping
    pod, or a rolling restart), with ``group.instance.id`` when ``static``."""

    def __init__(self, kafka, group: str, topics: list[str], client_id: str, every: float, static: bool):
        conf = {"group.instance.id": client_id} if static else {}
        self.start = lambda: Member(kafka.bootstrap_servers, group, topics, client_id, **conf)
        self.member = self.start()
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.member.stop()
            self.member = self.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.member.stop()


def test_members_restarting_without_static_membership_show_as_a_rebalance_storm(
    kafka, spark, log_and_lakehouse
):
    log, lakehouse = log_and_lakehouse
    batch, name = Batches(), topic(kafka, 2)
    dynamic, static = f"storm-{uuid.uuid4().hex[:6]}", f"static-{uuid.uuid4().hex[:6]}"
    restarters = []
    windows = []
    with members(kafka, dynamic, [name], 1), members(kafka, static, [name], 1, **{"group.instance.id": "s0"}):
        for group, is_static in ((dynamic, False), (static, True)):
            restarters.append(Restarter(kafka, group, [name], f"{group}-restarting", 3.0, is_static))
        try:
            for _ in range(3):
                start = datetime.now(UTC)
                while datetime.now(UTC) < start + timedelta(seconds=8):
                    log.refresh(app_id="test", batch_id=batch(), force=True)
                    time.sleep(0.7)
                windows.append((start, datetime.now(UTC)))
        finally:
            for restarter in restarters:
                restarter.stop()
    for start, end in windows:  # one window per batch, in order, as the sink closes them
        frame = partition_load(spark, start, end, {(name, p): (100.0, 1.0) for p in (0, 1)})
        log.close_windows(frame, app_id="test", batch_id=batch())

    storms = [
        a for a in table(lakehouse, "consumer_advice", dynamic) if a["kind"] == AdviceKind.REBALANCE_STORM
    ]
    assert storms, table(lakehouse, "consumer_groups", dynamic)
    assert {a["client_id"] for a in storms} == {f"{dynamic}-restarting"}
    churn = sorted(table(lakehouse, "consumer_groups", dynamic), key=lambda g: g["window_end"])
    assert sum(g["membership_changes"] > 0 for g in churn) >= 2 and sum(g["rejoins"] for g in churn) >= 2
    # The same restarts with group.instance.id: the same identity, no rebalance, no storm.
    quiet = table(lakehouse, "consumer_groups", static)
    assert len(quiet) == 3 and all(g["static_members"] == 2 for g in quiet)
    assert [
        a for a in table(lakehouse, "consumer_advice", static) if a["kind"] == AdviceKind.REBALANCE_STORM
    ] == []
