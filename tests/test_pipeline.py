"""End to end on real components: three real Apache Kafka brokers → Spark streaming job → Delta tables →
plans → SQL."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime

import pytest
import support
from support import T0, produce, simulated

from balancer import telemetry as tm
from balancer.cli.main import main as balancer_cli
from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.demo.simulator import SimulatedCluster
from balancer.spark import job
from balancer.spark.lakehouse import Lakehouse

pytestmark = pytest.mark.integration


@pytest.fixture
def broker(kafka):
    """This module runs on the three real Apache Kafka brokers (the session's ``kafka`` fixture), in place
    of the embedded one: ``topic`` and the tests below get them through this name."""
    return kafka


MALFORMED = [
    b"not json",
    b"",
    b'{"v":2,"type":"partition"}',
    b'{"v":1,"type":"partition","ts":"soon"}',
    json.dumps(
        {
            "v": 1,
            "type": "broker",
            "ts": T0,
            "cluster": "c",
            "broker": -3,
            "capacity": {"network_in": 1, "network_out": 1, "disk": 1},
        }
    ).encode(),
]


def job_config(tmp_path, broker, topic, *extra):
    """The shared test job's config with the data contract on: these tests follow it into quality_runs."""
    return support.job_config(tmp_path, broker.bootstrap_servers, topic, "quality.enabled=true", *extra)


def test_stream_lands_exactly_and_plans_an_imbalanced_cluster(spark, broker, topic, tmp_path, capsys, caplog):
    spec = ScenarioSpec(
        brokers=4,
        racks=2,
        topics=4,
        partitions_per_topic=(3, 6),
        replication_factor=2,
        total_bytes_in=40e6,
        new_empty_brokers=1,
        seed=3,
        cluster="it-1",
    )
    cluster = SimulatedCluster(generate(spec), noise=0.0)
    valid = [tm.encode(r) for minute in range(12) for r in cluster.telemetry(T0 + minute * 60_000)]
    produce(broker.bootstrap_servers, topic, valid[: len(valid) // 2] + MALFORMED + valid[len(valid) // 2 :])

    config = job_config(tmp_path, broker, topic)
    caplog.set_level(logging.INFO, logger="balancer.spark.pipeline")
    job.run_until_idle(spark, job.start(spark, config, once=True))
    # Each batch logs where its time went; the batches that closed windows include the plans.
    steps = [
        r.getMessage()
        for r in caplog.records
        if r.name == "balancer.spark.pipeline" and " took " in r.getMessage()
    ]
    assert steps and all("read, parse, land" in m for m in steps)
    assert any("windows (read back, aggregate)" in m and "plans" in m for m in steps), steps

    lakehouse = Lakehouse(spark, config.lakehouse.path, engine="delta-rs")
    raw = lakehouse.read("telemetry_raw")
    assert raw.count() == len(valid)
    assert raw.select("kafka_partition", "kafka_offset").distinct().count() == len(valid)
    quarantine = lakehouse.read("telemetry_quarantine")
    assert quarantine.count() == len(MALFORMED)
    assert quarantine.where("reason IS NULL OR reason = ''").count() == 0

    # Minutes 0-11 with a one-minute watermark finalize the windows [0,5) and [5,10).
    assert lakehouse.read("partition_load").select("window_end").distinct().count() == 2
    ranking = lakehouse.read("broker_ranking")
    assert ranking.select("broker").distinct().count() == 5  # the new, empty broker is ranked too
    plans = lakehouse.read("balance_plans").collect()
    assert len(plans) == 2 and all(p["cluster"] == "it-1" for p in plans)
    proposed = [p for p in plans if p["status"] == "proposed"]
    assert proposed, [(p["status"], p["reason"]) for p in plans]
    # One plan at a time: the window after the proposed one (closed in the same batch) waits on it.
    first, second = sorted(plans, key=lambda p: p["window_end"])
    assert first["status"] == "proposed", (first["status"], first["reason"])
    assert second["status"] == "waiting" and first["plan_id"] in second["reason"], second["reason"]
    assert all(p["imbalance_after"] < p["imbalance_before"] for p in proposed)
    actions = lakehouse.read("plan_actions").collect()
    for plan in proposed:
        own = [a for a in actions if a["plan_id"] == plan["plan_id"]]
        assert sum(a["action"] == "leadership" for a in own) == plan["leader_moves"]
        assert sum(a["bytes_to_move"] for a in own) == plan["bytes_to_move"]
        assert sorted(a["seq"] for a in own) == list(range(len(own)))  # numbered from 0, none missing

    # The CLI answers SQL on the tables by name, against the same lakehouse path.
    code = balancer_cli(
        [
            "sql",
            "--set",
            f"lakehouse.path={config.lakehouse.path}",
            "--set",
            "lakehouse.engine=delta-rs",
            "SELECT status, count(*) AS n FROM balance_plans GROUP BY status",
        ]
    )
    assert code == 0
    assert "proposed" in capsys.readouterr().out

    # Every notebook runs in a kernel on what the job wrote and finds what the job committed.
    from notebook_runner import notebook_paths, run_notebooks

    expected = {
        "balance_history.ipynb": {"len(plans)": len(plans), "len(first_window)": 5},
        "data_quality.ipynb": {"int(reasons.records.sum())": len(MALFORMED), "len(plans)": len(plans)},
        "plan_lifecycle.ipynb": {"sorted(status.plan_id)": sorted(p["plan_id"] for p in proposed)},
        "topology_history.ipynb": {"brokers.broker.nunique()": 5, "changes.moved.sum()": 0},
    }
    # consumer_balance reads the consumer tables, which this job (consumers.enabled false) does not write;
    # test_notebooks and the consumer tests on real groups run it.
    assert {path.name for path in notebook_paths()} == set(expected) | {"consumer_balance.ipynb"}
    runs = {path: {e: e for e in expected[path.name]} for path in notebook_paths() if path.name in expected}
    assert run_notebooks(runs, config.lakehouse.path) == expected


def test_rerun_on_same_checkpoint_writes_nothing_twice(spark, broker, topic, tmp_path, capsys):
    cluster = simulated(cluster="it-2")
    first = [tm.encode(r) for minute in range(7) for r in cluster.telemetry(T0 + minute * 60_000)]
    produce(broker.bootstrap_servers, topic, first)
    config = job_config(tmp_path, broker, topic)
    queries = job.start(spark, config, once=True)
    job.run_until_idle(spark, queries)
    # --once ends at the first empty trigger after the topic is drained (Spark's own default reports an
    # empty trigger only 10 s after the last batch with data, and the run would idle that long).
    assert idle_after_last_data(queries[0]) < 5.0
    lakehouse = Lakehouse(spark, config.lakehouse.path, engine="delta-rs")
    assert lakehouse.read("telemetry_raw").count() == len(first)
    plans_before = lakehouse.read("balance_plans").count()
    time.sleep(1.1)  # commit times are in milliseconds: a moment between the two runs
    between = datetime.now(UTC)
    time.sleep(1.1)

    second = [tm.encode(r) for minute in range(7, 12) for r in cluster.telemetry(T0 + minute * 60_000)]
    produce(broker.bootstrap_servers, topic, second)
    job.run_until_idle(spark, job.start(spark, config, once=True))
    assert lakehouse.read("telemetry_raw").count() == len(first) + len(second)
    plans = lakehouse.read("balance_plans")
    assert plans.count() == plans_before + 1
    assert plans.select("plan_id").distinct().count() == plans.count()

    # Time travel: the tables as the job had committed them between the two runs.
    capsys.readouterr()
    query = (
        "SELECT (SELECT count(*) FROM balance_plans) AS plans,"
        " (SELECT count(*) FROM telemetry_raw) AS records"
    )
    settings = ["--set", f"lakehouse.path={config.lakehouse.path}", "--set", "lakehouse.engine=delta-rs"]
    assert balancer_cli(["sql", *settings, "--as-of", between.isoformat(), query]) == 0
    then = capsys.readouterr().out
    assert balancer_cli(["sql", *settings, query]) == 0
    now = capsys.readouterr().out
    assert shown_row(then) == [plans_before, len(first)]
    assert shown_row(now) == [plans_before + 1, len(first) + len(second)]


def idle_after_last_data(query) -> float:
    """Seconds from the end of the query's last batch with data to the empty trigger's report after it."""
    progress = query.recentProgress
    last = max(i for i, p in enumerate(progress) if p["numInputRows"] > 0)
    assert last + 1 < len(progress), "no empty trigger was reported after the last batch with data"

    def moment(p: dict) -> float:
        return datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()

    ended = moment(progress[last]) + progress[last]["durationMs"]["triggerExecution"] / 1000
    return moment(progress[last + 1]) - ended


def shown_row(out: str) -> list[int]:
    """The first row of a DataFrame.show() table, as integers."""
    rows = [line.strip().strip("|").split("|") for line in out.splitlines() if line.startswith("|")]
    return [int(cell) for cell in rows[1]]
