"""The cluster path submitted with spark-submit.sh to a real Spark standalone cluster (master + two workers on
loopback, started from the venv's pyspark): Spark's Kafka source on three real brokers, delta-spark on
``s3a://``, executors on both workers."""

from __future__ import annotations

import subprocess
import uuid

import pytest
from deltalake import DeltaTable
from support import job_config, minutes_of, produce, simulated, write_config
from test_cluster_path import COMPARED
from test_cluster_path import table_rows as comparable_rows
from test_object_storage import moto_server, options
from test_pipeline import MALFORMED

from balancer.config import REPO_ROOT
from balancer.demo.cluster import StandaloneCluster, application_executors
from balancer.jvm import SHORT_LIVED_OPTIONS
from balancer.spark import job

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """A master and two 1-core workers (the machine's two cores), stopped with their process groups."""
    with StandaloneCluster(
        tmp_path_factory.mktemp("spark-standalone"), workers=2, cores=1, memory="1g"
    ) as cluster:
        yield cluster


def submit(standalone, config, log, *spark_options: str) -> subprocess.Popen:
    """``spark-submit.sh --master <standalone> [spark_options] --once --config config`` started, output in
    ``log``."""
    with open(log, "wb") as out:
        return subprocess.Popen(
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
        )


def test_cluster_path_on_the_standalone_cluster_lands_exactly_on_both_workers_and_s3a_row_for_row(
    standalone, spark, kafka, tmp_path
):
    """Spark's native Kafka source and delta-spark on the standalone cluster's two executors (one per worker),
    the lakehouse on ``s3a://`` (moto's S3 server; hadoop-aws from jvm/lib), reading three real Apache Kafka
    brokers: every record landed once or quarantined, and the same tables, row for row, as the python
    connector + delta-rs on local disk reading the same topic. One submission: each costs minutes of the
    suite's two cores."""
    with moto_server(tmp_path) as s3_endpoint:
        check_cluster_path(standalone, spark, kafka, tmp_path, s3_endpoint)


def check_cluster_path(standalone, spark, kafka, tmp_path, s3_endpoint) -> None:
    topic = f"sa-s3a-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=2, replication_factor=3)
    valid = minutes_of(simulated(cluster="sa-s3a"), 0, 6)
    produce(kafka.bootstrap_servers, topic, valid[: len(valid) // 2] + MALFORMED + valid[len(valid) // 2 :])
    root = f"s3a://balancer-lakehouse/{uuid.uuid4().hex}"
    app_name = f"balancer-standalone-{uuid.uuid4().hex[:8]}"
    config = write_config(
        tmp_path,
        kafka.bootstrap_servers,
        topic,
        source={"connector": "native", "max_records_per_batch": 100_000},
        lakehouse={"path": root, "engine": "delta-spark", "storage_options": options(s3_endpoint)},
        spark={
            "app_name": app_name,
            "conf": {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"},
        },
    )
    # Spark's own options pass through spark-submit.sh; the job's go to the job.
    log = tmp_path / "submit.log"
    submission = submit(
        standalone,
        config,
        log,
        *("--total-executor-cores", "2", "--executor-cores", "1", "--executor-memory", "768m"),
        # Start the first job only once both executors are up, so both take tasks.
        *("--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0"),
        *("--conf", "spark.scheduler.maxRegisteredResourcesWaitingTime=120s"),
        # Executors live as long as the test: C1 and the serial GC, as for the driver (tests/conftest.py).
        *("--conf", f"spark.executor.extraJavaOptions={' '.join(SHORT_LIVED_OPTIONS)}"),
    )
    try:
        # The reference lands meanwhile, in this process: the submission spends much of its time starting
        # its driver and executors.
        reference = job_config(tmp_path / "ref", kafka.bootstrap_servers, topic, "windows.size=5 minutes")
        job.run_until_idle(spark, job.start(spark, reference, once=True))
        assert submission.wait(timeout=1200) == 0, log.read_text()[-6000:]
    finally:
        if submission.poll() is None:
            submission.kill()

    s3 = root.replace("s3a://", "s3://")
    landed = DeltaTable(f"{s3}/telemetry_raw", storage_options=options(s3_endpoint)).to_pyarrow_table()
    assert landed.num_rows == len(valid)
    offsets = set(zip(landed["kafka_partition"].to_pylist(), landed["kafka_offset"].to_pylist(), strict=True))
    assert len(offsets) == len(valid)
    quarantined = DeltaTable(f"{s3}/telemetry_quarantine", storage_options=options(s3_endpoint))
    assert quarantined.to_pyarrow_table().num_rows == len(MALFORMED)

    for table in COMPARED:
        theirs = comparable_rows(s3, table, options(s3_endpoint))
        ours = comparable_rows(reference.lakehouse.path, table)
        assert ours, f"{table}: nothing to compare"
        assert theirs == ours, table

    # The master saw the application finish; both workers ran one of its executors, and each ran tasks.
    apps = [a for a in standalone.status()["completedapps"] if a["name"] == app_name]
    assert len(apps) == 1 and apps[0]["state"] == "FINISHED", apps
    app_id = apps[0]["id"]
    assert apps[0].get("memoryperexecutor", apps[0].get("memoryperslave")) == 768  # --executor-memory arrived
    assert application_executors(standalone, app_id) == [0, 1]
    for i in (1, 2):
        logs = list((standalone.root / f"worker-{i}" / "work" / app_id).glob("*/stderr"))
        assert logs and any("Finished task" in f.read_text(errors="replace") for f in logs), (i, logs)
