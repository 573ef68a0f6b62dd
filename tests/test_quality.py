"""The telemetry data contract on real components: embedded broker → streaming job → GX → Delta tables.

One job run feeds three clusters (healthy, a broker gone silent, too many quarantined records);
the tests below read what it wrote.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import Producer
from pyspark.sql import functions as F
from rows import WINDOW_COLUMNS, window_row

from balancer import telemetry as tm
from balancer.config import QualityConfig, load_config
from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.demo.simulator import SimulatedCluster
from balancer.spark import job
from balancer.spark.contract.quality import EXPECTATIONS_DIR, Contract, load_suite
from balancer.spark.lakehouse import Lakehouse
from balancer.spark.windows import loads

pytestmark = pytest.mark.integration

T0 = 1_790_000_000_000 // 300_000 * 300_000  # a 5-minute window boundary
MINUTES = 12  # windows [0,5) and [5,10) close under a one-minute watermark
SILENT_BROKER = 1


def _cluster(name: str, seed: int) -> SimulatedCluster:
    spec = ScenarioSpec(
        brokers=4,
        racks=0,
        topics=2,
        partitions_per_topic=(3, 3),
        replication_factor=2,
        total_bytes_in=20e6,
        seed=seed,
        cluster=name,
    )
    return SimulatedCluster(generate(spec), noise=0.0)


def _telemetry() -> list[bytes]:
    ok, silent, noisy = _cluster("q-ok", 1), _cluster("q-silent", 2), _cluster("q-noisy", 3)
    values = []
    for minute in range(MINUTES):
        ts = T0 + minute * 60_000
        # q-silent's broker 1 stops reporting for the second window only.
        if minute == 5:
            silent.silent_brokers.add(SILENT_BROKER)
        if minute == 10:
            silent.silent_brokers.discard(SILENT_BROKER)
        records = ok.telemetry(ts) + silent.telemetry(ts)
        noisy_records = noisy.telemetry(ts)
        # Half again as many broken copies (negative bytes_in): they are quarantined but name q-noisy.
        broken = [{**r, "bytes_in": -1.0} for r in noisy_records if r["type"] == "partition"]
        values += [tm.encode(r) for r in records + noisy_records + broken]
    return values


@pytest.fixture(scope="module")
def lakehouse(spark, broker, tmp_path_factory):
    root = tmp_path_factory.mktemp("quality")
    topic = f"quality-{uuid.uuid4().hex[:10]}"
    broker.create_topic(topic, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for value in _telemetry():
        producer.produce(topic, value=value)
    producer.flush(30)
    config = load_config(
        None,
        [
            f"source.bootstrap_servers={broker.bootstrap_servers}",
            f"source.topic={topic}",
            f"lakehouse.path={root / 'lakehouse'}",
            "lakehouse.engine=delta-rs",
            f"checkpoint.path={root / 'cp'}",
            "windows.size=5 minutes",
            "windows.slide=5 minutes",
            "windows.watermark=1 minute",
            "source.unavailable_timeout=10 seconds",
            "quality.max_quarantine_share=0.05",
        ],
    )
    job.run_until_idle(spark, job.start(spark, config, once=True))
    return Lakehouse(spark, config.lakehouse.path, engine="delta-rs")


def _plans(lakehouse, cluster):
    return sorted(
        lakehouse.read("balance_plans").where(f"cluster = '{cluster}'").collect(),
        key=lambda p: p["window_end"],
    )


def _runs(lakehouse, query, cluster):
    return lakehouse.read("quality_runs").where(f"query = '{query}' AND cluster = '{cluster}'").collect()


def test_healthy_telemetry_passes_and_is_recorded(lakehouse):
    plans = _plans(lakehouse, "q-ok")
    assert len(plans) == 2
    first, second = plans
    assert first["status"] in ("proposed", "balanced"), (first["status"], first["reason"])
    # One plan at a time: a window after a proposed plan waits on it; neither is skipped.
    expected = ("waiting",) if first["status"] == "proposed" else ("proposed", "balanced")
    assert second["status"] in expected, (second["status"], second["reason"])
    ingest, balance = _runs(lakehouse, "ingest", "q-ok"), _runs(lakehouse, "balance", "q-ok")
    assert ingest and all(r["success"] and r["suite"] == "telemetry_v1" for r in ingest)
    assert len(balance) == 2 and all(r["success"] and r["suite"] == "windows_v1" for r in balance)
    assert {r["window_end"] for r in balance} == {p["window_end"] for p in plans}
    assert all(r["evaluated"] > 0 and r["failed_expectations"] is None for r in ingest + balance)


def test_silent_broker_fails_the_contract_and_its_window_is_skipped(lakehouse):
    first, second = _plans(lakehouse, "q-silent")
    assert first["status"] in ("proposed", "balanced")
    assert second["status"] == "skipped"
    assert "data contract failed" in second["reason"]
    assert f"broker {SILENT_BROKER}: no capacity report (broker silent)" in second["reason"]
    assert "expect_column_values_to_be_between on capacity_reports" in second["reason"]
    assert lakehouse.read("plan_actions").where(f"plan_id = '{second['plan_id']}'").count() == 0
    runs = {r["window_end"]: r for r in _runs(lakehouse, "balance", "q-silent")}
    assert runs[first["window_end"]]["success"]
    failed = runs[second["window_end"]]
    assert not failed["success"]
    details = json.loads(failed["details_json"])["failures"]
    assert {f["broker"] for f in details} == {SILENT_BROKER}
    assert {f["column"] for f in details} >= {
        "capacity_reports",
        "unreported_replicas",
        "coverage",
        "report_age_seconds",
    }


def test_quarantine_share_over_the_limit_fails_the_batch_and_skips_the_clusters_windows(lakehouse):
    runs = _runs(lakehouse, "ingest", "q-noisy")
    assert runs and not any(r["success"] for r in runs)
    assert all("quarantine_share" in r["failed_expectations"] for r in runs)
    assert json.loads(runs[0]["details_json"])["quarantine_share"] > 0.05
    plans = _plans(lakehouse, "q-noisy")
    assert len(plans) == 2
    assert all(p["status"] == "skipped" and "quarantined records" in p["reason"] for p in plans)
    # Other clusters in the same batch are not affected by q-noisy's rejects.
    assert all(r["success"] for r in _runs(lakehouse, "ingest", "q-silent"))


@pytest.mark.parametrize("name", ["telemetry_v1", "windows_v1"])
def test_suite_files_are_valid_gx_suites(name):
    spec = json.loads((EXPECTATIONS_DIR / f"{name}.json").read_text())
    suite = load_suite(name)
    assert suite.name == name
    assert [e.expectation_type for e in suite.expectations] == [e["type"] for e in spec["expectations"]]


def test_disabled_contract_validates_nothing():
    contract = Contract(lakehouse=None, quality=QualityConfig(enabled=False))
    assert contract.check_ingest(None, None, app_id="a", batch_id=0) == []
    assert contract.check_windows(None, None, app_id="a", batch_id=0) is None


# -- the contract driven directly, on small inline frames (no broker, no job) -----------------------

W0, W1, W2 = (datetime(2026, 1, 1, 0, m, tzinfo=UTC) for m in (0, 5, 10))
VALID = (
    "v int, type string, ts timestamp, cluster string, broker int, topic string, partition int, "
    "bytes_in double, bytes_out double, messages_in double, size long, cpu double, "
    "capacity_network_in double, capacity_network_out double, capacity_disk double"
)
# Per call, on frames already cached: 2 (one aggregation), 4 when valid records fail (their samples).
# GX on Spark took 13 (ingest) and 26 (windows) for these suites.
MAX_JOBS = 4


def _contract(spark, tmp_path, **quality):
    lakehouse = Lakehouse(spark, tmp_path / "lakehouse", engine="delta-rs")
    lakehouse.create_all()
    return Contract(lakehouse, QualityConfig(**quality))


def _jobs(spark, call):
    """(result, Spark jobs started by ``call``)."""
    sc = spark.sparkContext
    group = f"quality-test-{uuid.uuid4().hex}"
    sc.setJobGroup(group, group)
    try:
        result = call()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return result, len(sc.statusTracker().getJobIdsForGroup(group))


def _record(cluster, **fields):
    row = {
        "v": 1,
        "type": "partition",
        "ts": W0,
        "cluster": cluster,
        "broker": 0,
        "topic": "t",
        "partition": 0,
        "bytes_in": 1.0,
        "bytes_out": 2.0,
        "messages_in": 3.0,
        "size": 4,
        "cpu": None,
        "capacity_network_in": None,
        "capacity_network_out": None,
        "capacity_disk": None,
    }
    return {**row, **fields}


def _ingest_batch(spark, records, quarantined=()):
    """(parsed, valid) as the sink hands them over: ``parsed`` with the raw ``value`` and
    ``quarantine_reason`` (NULL when valid), ``valid`` its valid records; both cached."""
    names = [f.split()[0] for f in VALID.split(", ")]
    rows = [tuple(r[n] for n in names) + (None, None) for r in records]
    rows += [(None,) * len(names) + (value, "broken") for value in quarantined]
    parsed = spark.createDataFrame(rows, VALID + ", value string, quarantine_reason string").cache()
    valid = parsed.where(F.col("quarantine_reason").isNull()).select(*names).cache()
    parsed.count(), valid.count()  # the sink's writes have materialized them by the time the contract runs
    return parsed, valid


def test_record_expectations_count_what_gx_counts_per_cluster(spark, tmp_path):
    records = [
        _record("a"),
        _record(
            "a", type="broker", cpu=0.5, capacity_network_in=1.0, capacity_network_out=1.0, capacity_disk=1.0
        ),
        _record("a", v=2, bytes_in=-1.0, partition=-3),
        _record("a", bytes_in=-5.0),
        _record("b", type="bogus", capacity_disk=0.0, broker=None, cpu=-0.1),
        _record("b", bytes_out=float("nan"), size=-1, messages_in=-2.0),
        _record(None, ts=None),
    ]
    parsed, valid = _ingest_batch(spark, records)
    contract = _contract(spark, tmp_path)
    rows, jobs = _jobs(spark, lambda: contract.check_ingest(parsed, valid, app_id="t", batch_id=1))
    assert jobs <= MAX_JOBS
    counted = {
        (r["cluster"], f["expectation"], f["column"]): f["unexpected_count"]
        for r in rows
        for f in json.loads(r["details_json"])["failures"]
    }

    # The same suite on the same records, by GX's Spark engine (one job per metric: the slow way).
    result = contract.validate(
        load_suite("telemetry_v1", "records"),
        valid,
        {"result_format": "COMPLETE", "unexpected_index_column_names": ["cluster"]},
    )
    expected = {}
    for item in result.results:
        config = item.expectation_config
        for row in item.result.get("unexpected_index_list") or []:
            key = (row["cluster"], config.type, config.kwargs["column"])
            expected[key] = expected.get(key, 0) + 1
    assert counted == expected
    assert ("a", "expect_column_values_to_be_between", "bytes_in") in counted  # a real check, not two empties
    assert counted[("a", "expect_column_values_to_be_between", "bytes_in")] == 2
    assert {r["cluster"]: r["success"] for r in rows} == {"a": False, "b": False, None: False}
    assert all(r["evaluated"] == len(load_suite("telemetry_v1").expectations) for r in rows)
    b = next(r for r in rows if r["cluster"] == "b")
    assert (
        "disk capacity is positive [expect_column_values_to_be_between on capacity_disk]"
        in b["failed_expectations"]
    )
    sample = {f["column"]: f["sample"] for f in json.loads(b["details_json"])["failures"]}
    assert sample["type"] == ["bogus"] and sample["size"] == [-1] and sample["broker"] == [None]


def test_quarantine_share_is_per_cluster_and_unattributed_rejects_count_for_every_cluster(spark, tmp_path):
    records = [_record("a", ts=W0 + timedelta(seconds=s)) for s in range(40)] + [_record("b")] * 10
    parsed, valid = _ingest_batch(spark, records, quarantined=["not json"])
    contract = _contract(spark, tmp_path, max_quarantine_share=0.05)
    rows, jobs = _jobs(spark, lambda: contract.check_ingest(parsed, valid, app_id="t", batch_id=7))
    assert jobs <= MAX_JOBS
    by_cluster = {r["cluster"]: r for r in rows}
    assert set(by_cluster) == {"a", "b", None}
    # a: 1 of 41 (2.4%) passes; b: 1 of 11 (9%) fails; the record naming no cluster: 1 of 1.
    assert by_cluster["a"]["success"] and not by_cluster["b"]["success"] and not by_cluster[None]["success"]
    assert json.loads(by_cluster["a"]["details_json"])["quarantined"] == 1
    assert "quarantine_share" in by_cluster["b"]["failed_expectations"]
    assert "(observed 0.09091)" in by_cluster["b"]["failed_expectations"]
    assert (by_cluster["a"]["window_start"], by_cluster["a"]["window_end"]) == (
        W0,
        W0 + timedelta(seconds=39),
    )
    landed = contract.lakehouse.read("quality_runs").where("query = 'ingest'").collect()
    assert sorted((r["cluster"] or "", r["success"]) for r in landed) == [
        ("", False),
        ("a", True),
        ("b", False),
    ]


def test_a_records_expectation_that_is_not_compiled_is_still_validated_by_gx(spark, tmp_path, monkeypatch):
    from balancer.spark.contract import expectations

    spec = json.loads((EXPECTATIONS_DIR / "telemetry_v1.json").read_text())
    spec["expectations"].append(
        {
            "type": "expect_column_values_to_be_between",
            "kwargs": {"column": "bytes_in", "max_value": 100, "mostly": 0.9},
            "meta": {"frame": "records", "says": "bytes_in mostly at most 100"},
        }
    )
    monkeypatch.setattr(
        expectations,
        "suite_json",
        lambda name: (
            spec if name == "telemetry_v1" else json.loads((EXPECTATIONS_DIR / f"{name}.json").read_text())
        ),
    )
    parsed, valid = _ingest_batch(spark, [_record("a")] * 3 + [_record("a", bytes_in=500.0)] * 2)
    rows = _contract(spark, tmp_path).check_ingest(parsed, valid, app_id="t", batch_id=1)
    assert [r["cluster"] for r in rows] == ["a"] and not rows[0]["success"]
    assert "bytes_in mostly at most 100" in rows[0]["failed_expectations"]
    assert rows[0]["evaluated"] == len(spec["expectations"])


def _report(window, broker, topic, partition, replicas, last_ts=None, samples=5):
    start, end = window
    return window_row(
        cluster="c",
        window_start=start,
        window_end=end,
        type="partition",
        broker=broker,
        topic=topic,
        partition=partition,
        bytes_in=1.0,
        bytes_out=1.0,
        messages_in=1.0,
        size=1.0,
        leader=broker == replicas[0],
        replicas=replicas,
        last_ts=last_ts or end,
        samples=samples,
    )


def _capacity(window, broker, last_ts=None, samples=5):
    start, end = window
    return window_row(
        cluster="c",
        window_start=start,
        window_end=end,
        type="broker",
        broker=broker,
        rack="r",
        capacity_network_in=1e8,
        capacity_network_out=1e8,
        capacity_disk=1e12,
        cpu=0.1,
        last_ts=last_ts or end,
        samples=samples,
    )


def _reference_broker_checks(windows, partitions):
    """The previous formulation (joins and a window function), to compare the one-shuffle one with."""
    from pyspark.sql import Window

    keys = ["cluster", "window_start", "window_end"]
    hosted = partitions.select(*keys, "topic", "partition", F.explode("replicas").alias("broker"))
    reports = windows.where(F.col("type") == "partition").select(
        *keys, "broker", "topic", "partition", F.lit(True).alias("_reported")
    )
    replicas = (
        hosted.join(reports, [*keys, "broker", "topic", "partition"], "left")
        .groupBy(*keys, "broker")
        .agg(
            F.count(F.lit(1)).alias("hosted_replicas"),
            F.sum(F.when(F.col("_reported").isNull(), 1).otherwise(0)).alias("unreported_replicas"),
        )
    )
    capacity = (
        windows.where(F.col("type") == "broker")
        .groupBy(*keys, "broker")
        .agg(F.sum("samples").alias("capacity_reports"))
    )
    latest = windows.groupBy(*keys, "broker").agg(F.max("last_ts").alias("last_report"))
    joined = (
        replicas.join(capacity, [*keys, "broker"], "full_outer")
        .join(latest, [*keys, "broker"], "left")
        .select(
            *keys,
            "broker",
            F.coalesce("hosted_replicas", F.lit(0)).alias("hosted_replicas"),
            F.coalesce("unreported_replicas", F.lit(0)).alias("unreported_replicas"),
            F.coalesce("capacity_reports", F.lit(0)).alias("capacity_reports"),
            "last_report",
        )
    )
    best = F.max("capacity_reports").over(Window.partitionBy(*keys))
    end_ms, start_ms = F.unix_millis("window_end"), F.unix_millis("window_start")
    return {
        (r[0], r[1], r[2], r[3]): tuple(r[4:])
        for r in joined.select(
            "cluster",
            start_ms,
            end_ms,
            "broker",
            "hosted_replicas",
            "unreported_replicas",
            "capacity_reports",
            F.coalesce(F.col("capacity_reports") / F.when(best > 0, best), F.lit(0.0)),
            (end_ms - F.coalesce(F.unix_millis("last_report"), start_ms)) / 1000.0,
        ).collect()
    }


def test_windows_checks_name_the_silent_broker_and_block_only_its_window(spark, tmp_path):
    first, second = (W0, W1), (W1, W2)
    topology = [("t", 0, [0, 1]), ("t", 1, [1, 2]), ("t", 2, [2, 0])]
    rows = [_report(first, b, t, p, r) for t, p, r in topology for b in r] + [
        _capacity(first, b) for b in (0, 1, 2)
    ]
    # Second window: broker 1 silent; broker 2 reports once, early; broker 3 is new: capacity only, hosts
    # nothing.
    rows += [_report(second, b, t, p, r) for t, p, r in topology for b in r if b == 0]
    rows += [
        _report(second, 2, t, p, r, last_ts=W1 + timedelta(seconds=30), samples=1)
        for t, p, r in topology
        if 2 in r
    ]
    rows += [
        _capacity(second, 0),
        _capacity(second, 2, last_ts=W1 + timedelta(seconds=30), samples=1),
        _capacity(second, 3),
    ]
    windows = spark.createDataFrame(rows, WINDOW_COLUMNS).cache()
    partitions = loads.partition_load(windows).cache()
    contract = _contract(spark, tmp_path)

    checks = contract.broker_checks(windows, partitions)
    mine = {
        (r.cluster, r.window_start_ms, r.window_end_ms, r.broker): (
            r.hosted_replicas,
            r.unreported_replicas,
            r.capacity_reports,
            r.coverage,
            r.report_age_seconds,
        )
        for r in checks.itertuples()
    }
    assert mine == _reference_broker_checks(windows, partitions)

    blocked, jobs = _jobs(spark, lambda: contract.check_windows(windows, partitions, app_id="t", batch_id=3))
    assert jobs <= MAX_JOBS + 1  # + reading back ingest verdicts when quality_runs is read by Spark
    blocked = blocked.collect()
    assert [(b["window_start"].timestamp(), b["window_end"].timestamp()) for b in blocked] == [
        (W1.timestamp(), W2.timestamp())
    ]
    reason = blocked[0]["reason"]
    assert (
        "broker 1: no capacity report (broker silent) (observed 0) "
        "[expect_column_values_to_be_between on capacity_reports]" in reason
    )
    assert "broker 1: replicas it hosts were not reported (broker silent) (observed 2)" in reason
    assert "broker 2: reported in too few of the window's intervals" in reason  # 1 of broker 3's 5
    assert "broker 2: latest report too old at window end" in reason and "(observed 270)" in reason
    assert "broker 3" not in reason and "broker 0" not in reason
    runs = {
        r["window_end"].timestamp(): r
        for r in contract.lakehouse.read("quality_runs").where("query = 'balance'").collect()
    }
    assert len(runs) == 2 and runs[W1.timestamp()]["success"]
    failed = json.loads(runs[W2.timestamp()]["details_json"])
    assert failed["brokers"] == 4 and {f["broker"] for f in failed["failures"]} == {1, 2}
    assert all(isinstance(f["broker"], int) for f in failed["failures"])


def test_windows_overlapping_a_failed_ingest_run_of_their_cluster_are_blocked(spark, tmp_path):
    contract = _contract(spark, tmp_path, max_quarantine_share=0.05)
    # The batch's records of c span [W1 + 1 min, W2 + 1 min]: the second window only.
    late_ms = int((W2 + timedelta(minutes=1)).timestamp() * 1000)
    records = [_record("c", ts=W1 + timedelta(minutes=1)), _record("c", ts=W2)]
    parsed, valid = _ingest_batch(spark, records, quarantined=[f'{{"cluster":"c","ts":{late_ms}}}'])
    assert not contract.check_ingest(parsed, valid, app_id="t", batch_id=1)[0]["success"]
    first, second = (W0, W1), (W1, W2)
    rows = [_report(w, 0, "t", 0, [0]) for w in (first, second)] + [_capacity(w, 0) for w in (first, second)]
    windows = spark.createDataFrame(rows, WINDOW_COLUMNS)
    blocked = contract.check_windows(windows, loads.partition_load(windows), app_id="t", batch_id=1).collect()
    assert [b["window_end"].timestamp() for b in blocked] == [W2.timestamp()]
    assert "ingest batch 1: share of quarantined records" in blocked[0]["reason"]


def test_summarize_ingest_partials_add_up_per_cluster_with_each_expectation_bit():
    import pyarrow as pa

    from balancer.spark.contract.expectations import IngestProbes, merge_ingest_summaries

    probes = IngestProbes.for_expectations(62)
    (mask,) = probes.masks
    base = 1_790_000_000_000  # ms; event times must be plausible to count (see IngestProbes.summarize)
    ts = pa.array(
        [(base + 60_000) * 1000, (base + 61_000) * 1000 + 999, None, (base + 59_000) * 1000, None],
        pa.timestamp("us", tz="UTC"),
    )
    batch = pa.RecordBatch.from_pydict(
        {
            "cluster": ["a", "a", None, "b", None],
            "ts": ts,
            probes.quarantined: [False, False, True, True, True],
            probes.named_cluster: [None, None, "a", None, None],
            probes.named_ts: [None, None, base + 70_000, None, None],
            # expectation 0 fails on the first record, 1 and 61 on the second.
            mask.column: pa.array([1, 2 | (1 << 61), 0, 0, 0], pa.int64()),
        }
    )
    halves = pa.concat_tables([probes.summarize(batch.slice(0, 2)), probes.summarize(batch.slice(2))])
    rows = {r.cluster: r for r in merge_ingest_summaries(halves)}
    assert rows["a"].records == 3 and rows["a"].quarantined == 1
    assert (rows["a"].first_ts_ms, rows["a"].last_ts_ms, rows["a"].valid_last_ts_ms) == (
        base + 60_000,
        base + 70_000,
        base + 61_000,
    )
    unexpected = rows["a"].unexpected
    assert len(unexpected) == 62 and (unexpected[0], unexpected[1], unexpected[61], unexpected[2]) == (
        1,
        1,
        1,
        0,
    )
    assert rows["b"].valid_last_ts_ms is None and rows["b"].quarantined == 1 and rows["b"].unexpected[0] == 0
    assert rows[None].records == 1 and rows[None].first_ts_ms is None
