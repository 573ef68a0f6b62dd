"""The telemetry data contract on real components: embedded broker → streaming job → GX → Delta tables.

One job run feeds three clusters (healthy, a broker gone silent, too many quarantined records);
the tests below read what it wrote.
"""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Producer

from balancer import telemetry as tm
from balancer.config import QualityConfig, load_config
from balancer.scenarios import ScenarioSpec, generate
from balancer.simulator import SimulatedCluster
from balancer.spark import job
from balancer.spark.lakehouse import Lakehouse
from balancer.spark.quality import EXPECTATIONS_DIR, Contract, load_suite

pytestmark = pytest.mark.integration

T0 = 1_790_000_000_000 // 300_000 * 300_000  # a 5-minute window boundary
MINUTES = 12  # windows [0,5) and [5,10) close under a one-minute watermark
SILENT_BROKER = 1


def _cluster(name: str, seed: int) -> SimulatedCluster:
    spec = ScenarioSpec(brokers=4, racks=0, topics=2, partitions_per_topic=(3, 3), replication_factor=2,
                        total_bytes_in=20e6, seed=seed, cluster=name)
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
    config = load_config(None, [
        f"source.bootstrap_servers={broker.bootstrap_servers}", f"source.topic={topic}",
        f"lakehouse.path={root / 'lakehouse'}", "lakehouse.engine=delta-rs", f"checkpoint.path={root / 'cp'}",
        "windows.size=5 minutes", "windows.slide=5 minutes", "windows.watermark=1 minute",
        "source.unavailable_timeout=10 seconds", "quality.max_quarantine_share=0.05"])
    job.run_until_idle(spark, job.start(spark, config, once=True))
    return Lakehouse(spark, config.lakehouse.path, engine="delta-rs")


def _plans(lakehouse, cluster):
    return sorted(lakehouse.read("balance_plans").where(f"cluster = '{cluster}'").collect(),
                  key=lambda p: p["window_end"])


def _runs(lakehouse, query, cluster):
    return lakehouse.read("quality_runs").where(f"query = '{query}' AND cluster = '{cluster}'").collect()


def test_healthy_telemetry_passes_and_is_recorded(lakehouse):
    plans = _plans(lakehouse, "q-ok")
    assert len(plans) == 2
    assert all(p["status"] in ("proposed", "balanced") for p in plans), [(p["status"], p["reason"]) for p in plans]
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
    assert {f["column"] for f in details} >= {"capacity_reports", "unreported_replicas", "coverage",
                                              "report_age_seconds"}


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
