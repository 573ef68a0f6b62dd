"""The job submitted with spark-submit.sh to a real Spark standalone cluster (master + two workers on
loopback, started from the venv's pyspark) against the embedded broker: exact counts in every table,
and executors on both workers."""

from __future__ import annotations

import subprocess
import uuid

import pytest
from deltalake import DeltaTable
from support import T0, job_config, minutes_of, produce, simulated, write_config
from test_cluster_path import COMPARED
from test_cluster_path import table_rows as comparable_rows
from test_object_storage import moto_server, options
from test_pipeline import MALFORMED

from balancer import telemetry as tm
from balancer.config import REPO_ROOT
from balancer.demo.cluster import StandaloneCluster, application_executors
from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.demo.simulator import SimulatedCluster
from balancer.spark import job
from balancer.spark.lakehouse import TABLES

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """A master and two 1-core workers (the machine's two cores), stopped with their process groups."""
    with StandaloneCluster(
        tmp_path_factory.mktemp("spark-standalone"), workers=2, cores=1, memory="1g"
    ) as cluster:
        yield cluster


def submit_once(standalone, config, log, *spark_options: str) -> None:
    """``spark-submit.sh --master <standalone> [spark_options] --once --config config``, output in ``log``."""
    with open(log, "wb") as out:
        done = subprocess.run(
            [
                str(REPO_ROOT / "spark-submit.sh"),
                "--master",
                standalone.master_url,
                *spark_options,
                "--once",
                "--config",
                str(config),
            ],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=1200,
        )
    assert done.returncode == 0, log.read_text()[-6000:]


def table_rows(lakehouse, table: str) -> list[dict]:
    return DeltaTable(str(lakehouse / table)).to_pyarrow_table().to_pylist()


def test_spark_submit_to_standalone_cluster_lands_exactly_on_both_workers(
    standalone, broker, topic, tmp_path
):
    spec = ScenarioSpec(
        brokers=4,
        racks=2,
        topics=4,
        partitions_per_topic=(3, 6),
        replication_factor=2,
        total_bytes_in=40e6,
        new_empty_brokers=1,
        seed=3,
        cluster="sa-1",
    )
    cluster = SimulatedCluster(generate(spec), noise=0.0)
    valid = [tm.encode(r) for minute in range(12) for r in cluster.telemetry(T0 + minute * 60_000)]
    produce(broker.bootstrap_servers, topic, valid[: len(valid) // 2] + MALFORMED + valid[len(valid) // 2 :])
    app_name = f"balancer-standalone-{uuid.uuid4().hex[:8]}"
    config = write_config(
        tmp_path,
        broker.bootstrap_servers,
        topic,
        source={"max_records_per_batch": 300},
        spark={
            "app_name": app_name,
            "conf": {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"},
        },
    )
    # Spark's own options pass through spark-submit.sh; the job's go to the job.
    spark_options = [
        "--total-executor-cores",
        "2",
        "--executor-cores",
        "1",
        "--executor-memory",
        "768m",
        # Start the first job only once both executors are up, so both take tasks.
        "--conf",
        "spark.scheduler.minRegisteredResourcesRatio=1.0",
        "--conf",
        "spark.scheduler.maxRegisteredResourcesWaitingTime=120s",
    ]
    submit_once(standalone, config, tmp_path / "submit.log", *spark_options)

    lakehouse = tmp_path / "lakehouse"
    rows = {table: table_rows(lakehouse, table) for table in TABLES}
    assert len(rows["telemetry_raw"]) == len(valid)
    assert len({(r["kafka_partition"], r["kafka_offset"]) for r in rows["telemetry_raw"]}) == len(valid)
    assert len(rows["telemetry_quarantine"]) == len(MALFORMED)
    # Minutes 0-11 with a one-minute watermark finalize the windows [0,5) and [5,10).
    windows = {r["window_end"] for r in rows["partition_load"]}
    assert len(windows) == 2
    assert len(rows["partition_load"]) == 2 * len(generate(spec)["partitions"])
    assert len(rows["broker_load"]) == 2 * 5 and len(rows["broker_ranking"]) == 2 * 5
    plans = rows["balance_plans"]
    assert len(plans) == 2 and all(p["cluster"] == "sa-1" for p in plans)
    proposed = [p for p in plans if p["status"] == "proposed"]
    assert proposed, [(p["status"], p["reason"]) for p in plans]
    for plan in proposed:
        own = [a for a in rows["plan_actions"] if a["plan_id"] == plan["plan_id"]]
        assert sum(a["action"] == "leadership" for a in own) == plan["leader_moves"]
        assert sum(a["bytes_to_move"] for a in own) == plan["bytes_to_move"]
    assert len(rows["plan_actions"]) == sum(
        len([a for a in rows["plan_actions"] if a["plan_id"] == p["plan_id"]]) for p in plans
    )

    # The master saw the application finish; both workers ran one of its executors, and each ran tasks.
    apps = [a for a in standalone.status()["completedapps"] if a["name"] == app_name]
    assert len(apps) == 1 and apps[0]["state"] == "FINISHED", apps
    app_id = apps[0]["id"]
    assert apps[0].get("memoryperexecutor", apps[0].get("memoryperslave")) == 768  # --executor-memory arrived
    assert application_executors(standalone, app_id) == [0, 1]
    for i in (1, 2):
        logs = list((standalone.root / f"worker-{i}" / "work" / app_id).glob("*/stderr"))
        assert logs and any("Finished task" in f.read_text(errors="replace") for f in logs), (i, logs)


def test_cluster_path_on_the_standalone_cluster_writes_s3a_row_for_row(standalone, spark, kafka, tmp_path):
    """Spark's native Kafka source and delta-spark on the standalone cluster's two executors, the lakehouse
    on ``s3a://`` (moto's S3 server; hadoop-aws from jvm/lib), reading three real Apache Kafka brokers: the
    same tables, row for row, as the python connector + delta-rs on local disk reading the same topic."""
    with moto_server(tmp_path) as s3_endpoint:
        check_cluster_path(standalone, spark, kafka, tmp_path, s3_endpoint)


def check_cluster_path(standalone, spark, kafka, tmp_path, s3_endpoint) -> None:
    topic = f"sa-s3a-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=2, replication_factor=3)
    produce(kafka.bootstrap_servers, topic, minutes_of(simulated(cluster="sa-s3a"), 0, 6) + MALFORMED)
    root = f"s3a://balancer-lakehouse/{uuid.uuid4().hex}"
    config = write_config(
        tmp_path,
        kafka.bootstrap_servers,
        topic,
        source={"connector": "native", "max_records_per_batch": 100_000},
        lakehouse={"path": root, "engine": "delta-spark", "storage_options": options(s3_endpoint)},
        spark={"conf": {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}},
    )
    submit_once(
        standalone,
        config,
        tmp_path / "submit.log",
        *("--total-executor-cores", "2", "--executor-cores", "1", "--executor-memory", "768m"),
    )

    reference = job_config(tmp_path / "ref", kafka.bootstrap_servers, topic, "windows.size=5 minutes")
    job.run_until_idle(spark, job.start(spark, reference, once=True))

    for table in COMPARED:
        theirs = comparable_rows(root.replace("s3a://", "s3://"), table, options(s3_endpoint))
        ours = comparable_rows(reference.lakehouse.path, table)
        assert ours, f"{table}: nothing to compare"
        assert theirs == ours, table
