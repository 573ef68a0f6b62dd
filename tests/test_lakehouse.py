"""Lakehouse.append on the delta-rs engine: executors write parquet, the driver commits once."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest
from deltalake import DeltaTable
from rows import as_tuple, table_row

from balancer.spark.contract.expectations import ClusterIngest, IngestProbes, merge_ingest_summaries
from balancer.spark.lakehouse import ROUTE_COLUMN, Lakehouse, Route, delta_rs, parquet, spark_schema
from balancer.spark.land.telemetry import LandingRoute

T0 = dt.datetime(2026, 9, 21, 12, 0, 0, 123456)


def raw_rows(n: int, start: int = 0) -> list[dict]:
    rows = []
    for i in range(start, start + n):
        broker = i % 7
        rows.append(
            table_row(
                "telemetry_raw",
                kafka_topic="metrics",
                kafka_partition=i % 3,
                kafka_offset=i,
                kafka_timestamp=T0,
                v=1,
                type="partition",
                ts=T0 + dt.timedelta(microseconds=i),
                cluster="c1",
                broker=broker,
                topic=f"topic-{i % 11}",
                partition=i % 13,
                leader=i % 2 == 0,
                replicas=[broker, (broker + 1) % 7],
                bytes_in=float(i),
                bytes_out=2.0 * i,
                messages_in=i / 200.0,
                size=1e6 + i,
                rack=None if i % 5 else "rack-a",
                is_late=False,
                batch_id=4,
                ingested_at=T0,
            )
        )
    return rows


@pytest.fixture
def house(spark, tmp_path) -> Lakehouse:
    house = Lakehouse(spark, tmp_path / "lakehouse", engine="delta-rs")
    house.create_all()
    return house


def to_ms(stamp: dt.datetime) -> int:
    return int(stamp.replace(tzinfo=dt.UTC).timestamp() * 1000)


def frame(spark, rows: list[dict], partitions: int):
    tuples = [as_tuple("telemetry_raw", row) for row in rows]
    return spark.createDataFrame(tuples, spark_schema("telemetry_raw")).repartition(partitions)


def key(row) -> tuple:
    return row["kafka_partition"], row["kafka_offset"]


def log_adds(path: str) -> list[dict]:
    adds = []
    for commit in sorted(Path(path, "_delta_log").glob("*.json")):
        adds += [json.loads(line)["add"] for line in commit.read_text().splitlines() if '"add"' in line]
    return adds


@pytest.mark.integration
@pytest.mark.parametrize(
    "inline_max_bytes", [0, parquet.INLINE_MAX_BYTES], ids=["executor-files", "inline-small"]
)
def test_append_then_read_back_equals_input(spark, house, monkeypatch, inline_max_bytes):
    monkeypatch.setattr(parquet, "INLINE_MAX_BYTES", inline_max_bytes)
    rows = raw_rows(3000)
    data = frame(spark, rows, 3)
    assert house.append("telemetry_raw", data, app_id="app-1", batch_id=0)

    back = house.read("telemetry_raw").collect()
    expected = data.collect()
    assert sorted(back, key=key) == sorted(expected, key=key)
    # delta-rs reads its own log: one commit, same rows, and the app transaction recorded.
    delta = DeltaTable(house.path("telemetry_raw"))
    assert delta.to_pyarrow_table().num_rows == len(rows)
    assert delta.transaction_version("app-1") == 0
    adds = log_adds(house.path("telemetry_raw"))
    # Three executor files, or all partitions inline → one driver file.
    assert len(adds) == (3 if inline_max_bytes == 0 else 1)
    stats = [json.loads(a["stats"]) for a in adds]
    assert sum(s["numRecords"] for s in stats) == len(rows)
    assert min(s["minValues"]["kafka_offset"] for s in stats) == 0
    assert max(s["maxValues"]["kafka_offset"] for s in stats) == len(rows) - 1
    # Timestamp stats are rounded outwards to the millisecond: they still cover every value.
    assert min(s["minValues"]["ts"] for s in stats) == "2026-09-21T12:00:00.123Z"
    assert max(s["maxValues"]["ts"] for s in stats) == "2026-09-21T12:00:00.127Z"
    assert sum(s["nullCount"]["rack"] for s in stats) == len(rows) - len(rows) // 5


@pytest.mark.integration
def test_replay_of_committed_batch_writes_nothing(spark, house):
    data = frame(spark, raw_rows(500), 2)
    assert house.append("telemetry_raw", data, app_id="app-1", batch_id=0)
    assert house.append("telemetry_raw", frame(spark, raw_rows(200, 500), 2), app_id="app-1", batch_id=1)
    path = house.path("telemetry_raw")
    files_before = sorted(os.listdir(path))
    version_before = DeltaTable(path).version()

    assert not house.append("telemetry_raw", data, app_id="app-1", batch_id=0)
    assert not house.append("telemetry_raw", data, app_id="app-1", batch_id=1)
    assert sorted(os.listdir(path)) == files_before  # no data file written, no commit
    assert DeltaTable(path).version() == version_before
    assert house.read("telemetry_raw").count() == 700
    # Another writer (a fresh checkpoint) with the same batch id is not a replay.
    assert house.append("telemetry_raw", data, app_id="app-2", batch_id=0)
    assert DeltaTable(path).to_pyarrow_table().num_rows == 1200


@pytest.mark.integration
def test_files_written_but_not_committed_are_invisible(spark, house):
    path = house.path("telemetry_raw")
    assert house.append("telemetry_raw", frame(spark, raw_rows(100), 1), app_id="app-1", batch_id=0)
    # A batch that crashed between the executors' writes and the driver's commit.
    orphans = parquet.write_files(
        frame(spark, raw_rows(400, 100), 2), path, "telemetry_raw", prefix="b1", inline_max_bytes=0
    )
    assert len(orphans) == 2 and all(Path(path, a.path).exists() for a in orphans)

    assert house.read("telemetry_raw").count() == 100
    assert DeltaTable(path).to_pyarrow_table().num_rows == 100
    assert spark.read.parquet(*(str(Path(path, a.path)) for a in orphans)).count() == 400  # they do exist
    # The replayed batch commits its own new files; the orphans stay out of the log.
    assert house.append("telemetry_raw", frame(spark, raw_rows(400, 100), 2), app_id="app-1", batch_id=1)
    assert house.read("telemetry_raw").count() == 500
    assert not {a.path for a in orphans} & {a["path"] for a in log_adds(path)}
    # Only a FULL vacuum lists the folder; the default (lite) one only deletes files the log removed.
    removed = DeltaTable(path).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True
    )
    assert sorted(Path(r).name for r in removed) == sorted(a.path for a in orphans)
    assert house.read("telemetry_raw").count() == 500


@pytest.mark.integration
def test_empty_frame_commits_the_transaction_only(spark, house):
    path = house.path("telemetry_quarantine")
    empty = spark.createDataFrame([], spark_schema("telemetry_quarantine"))
    assert house.append("telemetry_quarantine", empty, app_id="app-1", batch_id=3)
    assert DeltaTable(path).transaction_version("app-1") == 3
    assert not log_adds(path)
    assert not house.append("telemetry_quarantine", empty, app_id="app-1", batch_id=3)


@pytest.mark.integration
def test_arrow_table_on_driver_still_uses_write_deltalake(spark, house):
    data = frame(spark, raw_rows(50), 1).toArrow()
    assert house.append("telemetry_raw", data, app_id="app-1", batch_id=0)
    assert house.read("telemetry_raw").count() == 50


@pytest.mark.integration
def test_small_frames_of_known_size_are_written_by_the_driver(spark, house, monkeypatch):
    small = frame(spark, raw_rows(200), 2).cache()
    small.count()  # materialized: Spark now knows its size
    assert delta_rs.estimated_bytes(small) <= delta_rs.DRIVER_MAX_BYTES
    assert (
        delta_rs.estimated_bytes(frame(spark, raw_rows(200), 2)) > delta_rs.DRIVER_MAX_BYTES
    )  # unknown size
    monkeypatch.setattr(
        delta_rs, "write_files", lambda *a, **k: pytest.fail("small frame sent to the executors")
    )
    assert house.append("telemetry_raw", small, app_id="app-1", batch_id=0)
    assert DeltaTable(house.path("telemetry_raw")).to_pyarrow_table().num_rows == 200


@pytest.mark.integration
def test_empty_frame_of_unknown_size_starts_no_executor_write(spark, house, monkeypatch):
    empty = frame(spark, raw_rows(10), 2).where("kafka_offset < 0")
    assert delta_rs.estimated_bytes(empty) > delta_rs.DRIVER_MAX_BYTES
    monkeypatch.setattr(
        delta_rs, "write_files", lambda *a, **k: pytest.fail("empty frame sent to the executors")
    )
    assert house.append("telemetry_raw", empty, app_id="app-1", batch_id=5)
    assert DeltaTable(house.path("telemetry_raw")).transaction_version("app-1") == 5
    assert house.read("telemetry_raw").count() == 0


@pytest.mark.integration
def test_column_max_reads_the_log_statistics_and_matches_a_scan(spark, tmp_path):
    from datetime import datetime

    from pyspark.sql import functions as F

    lakehouse = Lakehouse(spark, tmp_path / "lh", engine="delta-rs")
    lakehouse.create_all()
    assert lakehouse.column_max("telemetry_raw", "ts") is None
    for batch_id, minute in enumerate((3, 9, 5)):
        rows = [
            (
                "m",
                0,
                batch_id * 10 + i,
                None,
                1,
                "broker",
                datetime(2026, 1, 1, 0, minute, i, tzinfo=dt.UTC),
                "c",
                1,
            )
            for i in range(3)
        ]
        frame = spark.createDataFrame(
            rows,
            "kafka_topic string, kafka_partition int, kafka_offset long, "
            "kafka_timestamp timestamp, v int, type string, ts timestamp, "
            "cluster string, broker int",
        )
        full = frame.select(
            "*",
            *[
                F.lit(None).cast(f.dataType).alias(f.name)
                for f in spark_schema("telemetry_raw").fields
                if f.name not in frame.columns
            ],
        )
        lakehouse.append("telemetry_raw", full, app_id="t", batch_id=batch_id)
    scanned = lakehouse.read("telemetry_raw").agg(F.max("ts")).first()[0]
    from_log = lakehouse.column_max("telemetry_raw", "ts")
    assert scanned.replace(tzinfo=dt.UTC) == datetime(2026, 1, 1, 0, 9, 2, tzinfo=dt.UTC)
    # File statistics are rounded up to the millisecond at most.
    assert 0 <= (from_log - datetime(2026, 1, 1, 0, 9, 2, tzinfo=dt.UTC)).total_seconds() < 0.001


@pytest.mark.integration
def test_read_range_lists_only_files_whose_stats_overlap_and_filters_rows(spark, house):
    # Three batches, each its own commit (file) one hour apart in event time.
    for batch in range(3):
        rows = [
            {**r, "ts": T0 + dt.timedelta(hours=batch, seconds=i)}
            for i, r in enumerate(raw_rows(50, start=batch * 50))
        ]
        house.append("telemetry_raw", frame(spark, rows, 1).coalesce(1), app_id="a", batch_id=batch)
    lo, hi = to_ms(T0 + dt.timedelta(hours=1)), to_ms(T0 + dt.timedelta(hours=1, seconds=10))

    window = house.read_range("telemetry_raw", "ts", lo, hi)
    assert len(window.inputFiles()) == 1  # batches 0 and 2 are ruled out by their Delta statistics
    got = sorted(r["kafka_offset"] for r in window.collect())
    assert got == list(range(50, 60))  # lo inclusive, hi exclusive (T0 has 123456 µs: second 10 falls out)

    open_below = house.read_range("telemetry_raw", "ts", None, hi)
    assert len(open_below.inputFiles()) == 2 and open_below.count() == 60
    assert house.read_range("telemetry_raw", "ts", hi + 10 * 3600_000, hi + 11 * 3600_000).count() == 0


@pytest.mark.integration
@pytest.mark.parametrize(
    "inline_max_bytes", [0, parquet.INLINE_MAX_BYTES], ids=["executor-files", "inline-small"]
)
def test_append_routed_lands_each_row_in_its_table_once_in_one_pass(
    spark, house, monkeypatch, inline_max_bytes
):
    from pyspark.sql import functions as F

    monkeypatch.setattr(parquet, "INLINE_MAX_BYTES", inline_max_bytes)
    rows = raw_rows(900)
    probes = IngestProbes()
    bad = F.col("kafka_offset") % 10 == 0
    data = frame(spark, rows, 3).select(
        "*",
        F.when(bad, int(LandingRoute.QUARANTINE))
        .otherwise(int(LandingRoute.RAW))
        .cast("byte")
        .alias(ROUTE_COLUMN),
        F.lit(None).cast("binary").alias("key"),
        F.lit(None).cast("binary").alias("value"),
        F.lit(None).cast("string").alias("value_text"),
        F.lit("too hot").alias("reason"),
        F.col("ingested_at").alias("quarantined_at"),
        # The ingest contract's probes (no compiled expectations), reduced beside the writes.
        bad.alias(probes.quarantined),
        F.lit(None).cast("string").alias(probes.named_cluster),
        F.lit(None).cast("long").alias(probes.named_ts),
    )
    landed = house.append_routed(data, LandingRoute, app_id="app-1", batch_id=0, summarize=probes)
    assert landed.committed == {"telemetry_raw": True, "telemetry_quarantine": True}
    last_valid = max(r["ts"] for r in rows if r["kafka_offset"] % 10)
    expected = [
        ClusterIngest(
            cluster="c1",
            records=900,
            quarantined=90,
            first_ts_ms=to_ms(rows[0]["ts"]),
            last_ts_ms=to_ms(rows[-1]["ts"]),
            valid_last_ts_ms=to_ms(last_valid),
            unexpected=(),
        )
    ]
    assert merge_ingest_summaries(landed.summary) == expected
    raw = house.read("telemetry_raw").collect()
    quarantine = house.read("telemetry_quarantine").collect()
    assert sorted(r["kafka_offset"] for r in raw) == [i for i in range(900) if i % 10]
    assert sorted(r["kafka_offset"] for r in quarantine) == list(range(0, 900, 10))
    assert {r["reason"] for r in quarantine} == {"too hot"}
    by_offset = {r["kafka_offset"]: r for r in rows}
    assert all(r.asDict() == by_offset[r["kafka_offset"]] for r in raw)  # every column as it was

    # A replay commits nothing again, but still summarizes every row (the caller needs its figures).
    landed = house.append_routed(data, LandingRoute, app_id="app-1", batch_id=0, summarize=probes)
    assert landed.committed == {"telemetry_raw": False, "telemetry_quarantine": False}
    assert merge_ingest_summaries(landed.summary) == expected
    assert house.read("telemetry_raw").count() == 810 and house.read("telemetry_quarantine").count() == 90
    # One table done, the other not (a crash between the two commits): only the missing one is written.
    landed = house.append_routed(data, LandingRoute, app_id="app-2", batch_id=0)
    assert landed.committed == {"telemetry_raw": True, "telemetry_quarantine": True}
    house.append("telemetry_raw", data.where(~bad), app_id="app-3", batch_id=0)
    files_before = set(os.listdir(house.path("telemetry_raw")))
    landed = house.append_routed(data, LandingRoute, app_id="app-3", batch_id=0)
    assert landed.committed == {"telemetry_raw": False, "telemetry_quarantine": True}
    assert set(os.listdir(house.path("telemetry_raw"))) == files_before  # no orphan files either
    assert house.read("telemetry_quarantine").count() == 270


@pytest.mark.integration
def test_append_routed_on_an_empty_frame_commits_the_transactions_only(spark, house):
    from pyspark.sql import functions as F

    class RawOnly(Route):
        RAW = 0, "telemetry_raw"

    empty = frame(spark, raw_rows(10), 2).where("kafka_offset < 0").select("*", F.lit(0).alias(ROUTE_COLUMN))
    landed = house.append_routed(empty, RawOnly, app_id="app-1", batch_id=4)
    assert landed.committed == {"telemetry_raw": True} and landed.summary is None
    assert DeltaTable(house.path("telemetry_raw")).transaction_version("app-1") == 4
    assert not log_adds(house.path("telemetry_raw"))


def test_file_stats_leave_out_bounds_json_cannot_hold():
    """Text that is not valid UTF-8 (kept out by the parser; this is the fallback) or an infinity gets no
    min/max, so writing the file's statistics never fails; the other columns keep theirs."""
    import pyarrow as pa

    schema = pa.schema([("name", pa.string()), ("rate", pa.float64()), ("n", pa.int64())])
    names = pa.Array.from_buffers(
        pa.string(),
        2,
        [None, pa.py_buffer(pa.array([0, 1, 3], pa.int32()).buffers()[1]), pa.py_buffer(b"a\xff\xfe")],
    )
    stats = parquet.FileStats(schema)
    stats.add(
        pa.RecordBatch.from_arrays([names, pa.array([1.0, float("inf")]), pa.array([4, 2])], schema=schema)
    )
    stats.add(
        pa.RecordBatch.from_arrays(
            [pa.array(["b", "c"]), pa.array([2.0, 3.0]), pa.array([1, 9])], schema=schema
        )
    )
    out = json.loads(stats.json())
    assert out["numRecords"] == 4 and out["nullCount"] == {"name": 0, "rate": 0, "n": 0}
    assert out["minValues"] == {"n": 1} and out["maxValues"] == {"n": 9}


@pytest.mark.integration
def test_an_equality_filter_on_long_strings_finds_its_rows(spark, house):
    """A string column's file stats must let a reader find every value in the file, short (plan ids) or
    longer than the stats' cap: delta-rs prunes a file whose column lacks a min or a max."""
    import uuid

    ids = [str(uuid.uuid4()) for _ in range(3)]
    rows = [
        (pid, "c1", seq, "leadership", "topic-" + "x" * 300, seq, [1, 2], [2, 1], 1, 2, 0)
        for pid in ids
        for seq in range(4)
    ]
    house.append(
        "plan_actions", spark.createDataFrame(rows, spark_schema("plan_actions")), app_id="t", batch_id=0
    )
    table = DeltaTable(house.path("plan_actions"))
    for pid in ids:
        assert table.to_pyarrow_table(filters=[("plan_id", "=", pid)]).num_rows == 4, pid
    assert table.to_pyarrow_table(filters=[("topic", "=", "topic-" + "x" * 300)]).num_rows == 12


@pytest.mark.integration
def test_select_pushes_each_filter_down_and_returns_aware_timestamps(spark, house):
    rows = raw_rows(40)
    house.append("telemetry_raw", frame(spark, rows[:20], 1), app_id="a", batch_id=0)
    house.append("telemetry_raw", frame(spark, rows[20:], 1), app_id="a", batch_id=1)
    after = (T0 + dt.timedelta(microseconds=10)).replace(tzinfo=dt.UTC)
    got = house.select(
        "telemetry_raw",
        ["kafka_offset", "ts", "leader"],
        [("ts", ">=", after), ("kafka_offset", "<", 30), ("leader", "=", True), ("broker", "in", [0, 2, 4])],
    ).to_pylist()
    expected = [
        r["kafka_offset"]
        for r in rows
        if r["ts"] >= T0 + dt.timedelta(microseconds=10)
        and r["kafka_offset"] < 30
        and r["leader"]
        and r["broker"] in (0, 2, 4)
    ]
    assert sorted(r["kafka_offset"] for r in got) == expected and expected
    assert all(r["ts"].tzinfo is not None for r in got)
    assert house.select("balance_plans", ["plan_id"], [("status", "=", "proposed")]).num_rows == 0
