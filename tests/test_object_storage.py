"""The lakehouse on object storage: moto's standalone S3 server on loopback (a real HTTP S3 API), the job
writing every table there through delta-rs and the executors' pyarrow writes, `balancer sql` reading them
back; the storage options' translation and redaction."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from balancer.cli.main import main as balancer_cli
from balancer.config import ConfigError, load_config
from balancer.demo.ports import free_port
from balancer.storage import Storage, normalize_root

SECRET = "s3cr3t-" + uuid.uuid4().hex  # must never show up in logs, errors or tables
KEY_ID = "AKIDTEST" + uuid.uuid4().hex[:8].upper()


@contextlib.contextmanager
def moto_server(folder: Path):
    """moto's S3 server on a free loopback port, with one bucket; stopped with its process group."""
    import boto3

    port = free_port()
    log = folder / "moto.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=KEY_ID,
            aws_secret_access_key=SECRET,
            region_name="us-east-1",
        ).create_bucket(Bucket="balancer-lakehouse")
        yield endpoint
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    with moto_server(tmp_path_factory.mktemp("moto")) as endpoint:
        yield endpoint


def options(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }


# -- the root and options, no server --------------------------------------------------------


def test_local_roots_resolve_as_before_and_uris_keep_their_scheme(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert normalize_root("data/lh") == str((tmp_path / "data" / "lh").resolve())
    assert normalize_root(tmp_path / "x") == str((tmp_path / "x").resolve())
    assert normalize_root(f"file://{tmp_path}/y") == str(tmp_path / "y")
    assert normalize_root("s3://bucket/a/b/") == "s3://bucket/a/b"
    assert Storage.of("s3a://bucket").join("telemetry_raw") == "s3a://bucket/telemetry_raw"
    local = Storage.of(tmp_path)
    assert local.local and local.delta_options() is None and local.hadoop_conf() == {}
    with pytest.raises(ValueError, match="credentials"):
        normalize_root("s3://AKID:pw@bucket/x")
    with pytest.raises(ValueError, match="unsupported scheme"):
        normalize_root("hdfs://nn/x")


def test_commit_safety_defaults_to_conditional_put_unless_chosen():
    assert Storage.of("s3://b/p").options == {"aws_conditional_put": "etag"}
    chosen = {"AWS_S3_LOCKING_PROVIDER": "dynamodb", "DELTA_DYNAMO_TABLE_NAME": "delta_log"}
    assert Storage.of("s3://b/p", chosen).options == chosen
    assert Storage.of("s3://b/p", {"AWS_S3_ALLOW_UNSAFE_RENAME": "true"}).options == {
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true"
    }


def test_storage_options_map_to_hadoop_s3a():
    storage = Storage.of("s3://b/p", {**options("http://127.0.0.1:9000"), "AWS_SESSION_TOKEN": "tok"})
    assert storage.hadoop_conf() == {
        "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "fs.s3a.endpoint": "http://127.0.0.1:9000",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.access.key": KEY_ID,
        "fs.s3a.secret.key": SECRET,
        "fs.s3a.session.token": "tok",
        "fs.s3a.endpoint.region": "us-east-1",
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider",
    }
    # object_store's other spellings of the same settings
    short = Storage.of(
        "s3a://b",
        {
            "endpoint": "https://minio:9000",
            "access_key_id": "k",
            "secret_access_key": "s",
            "region": "eu-west-1",
        },
    )
    assert short.hadoop_conf()["fs.s3a.endpoint"] == "https://minio:9000"
    assert "fs.s3a.connection.ssl.enabled" not in short.hadoop_conf()
    assert short.hadoop_conf()["fs.s3a.endpoint.region"] == "eu-west-1"


def test_credentials_are_never_echoed():
    storage = Storage.of("s3://b/p", options("http://127.0.0.1:9000"))
    assert SECRET not in repr(storage) and KEY_ID not in repr(storage)
    config = load_config(
        None, ["lakehouse.path=s3://b/p", f"lakehouse.storage_options.AWS_SECRET_ACCESS_KEY={SECRET}"]
    )
    assert SECRET not in repr(config) and SECRET not in str(config.lakehouse)
    with pytest.raises(ConfigError) as bad:
        load_config(None, [f"lakehouse.path=s3://{KEY_ID}:{SECRET}@b/p"])
    assert SECRET not in str(bad.value) and "storage_options" in str(bad.value)


# -- against the S3 server --------------------------------------------------------------------


def test_two_writers_from_the_same_version_both_commit(s3_endpoint):
    """Drivers committing to one table at the same moment (jobs sharing a lakehouse): with conditional put
    only one creates each log entry, the others see the conflict and commit the next version; nothing is
    lost. The writers load the same version, then wait at a barrier so their commits race."""
    from deltalake import DeltaTable, write_deltalake

    storage = Storage.of(f"s3://balancer-lakehouse/{uuid.uuid4().hex}", options(s3_endpoint))
    uri, opts = storage.join("t"), storage.delta_options()
    DeltaTable.create(uri, schema=pa.schema([("writer", pa.int64())]), storage_options=opts)
    writers = 4
    tables = [DeltaTable(uri, storage_options=opts) for _ in range(writers)]  # all at version 0
    start = threading.Barrier(writers)

    def write(i: int) -> None:
        start.wait()
        write_deltalake(tables[i], pa.table({"writer": [i]}), mode="append")

    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(write, range(writers)))
    table = DeltaTable(uri, storage_options=opts)
    assert table.version() == writers
    assert sorted(table.to_pyarrow_table()["writer"].to_pylist()) == list(range(writers))


@pytest.mark.integration
def test_job_writes_every_table_to_s3_and_sql_reads_them(
    spark, broker, topic, tmp_path, s3_endpoint, capsys, caplog
):
    from deltalake import DeltaTable
    from support import T0, produce
    from test_pipeline import MALFORMED, job_config

    from balancer import telemetry as tm
    from balancer.demo.scenarios import ScenarioSpec, generate
    from balancer.demo.simulator import SimulatedCluster
    from balancer.spark import job
    from balancer.spark.lakehouse import TABLES

    spec = ScenarioSpec(
        brokers=4,
        racks=2,
        topics=3,
        partitions_per_topic=(3, 4),
        replication_factor=2,
        total_bytes_in=40e6,
        new_empty_brokers=1,
        seed=3,
        cluster="s3-1",
    )
    cluster = SimulatedCluster(generate(spec), noise=0.0)
    valid = [tm.encode(r) for minute in range(12) for r in cluster.telemetry(T0 + minute * 60_000)]
    produce(broker.bootstrap_servers, topic, valid[: len(valid) // 2] + MALFORMED + valid[len(valid) // 2 :])

    root = f"s3://balancer-lakehouse/{uuid.uuid4().hex}/lakehouse"
    settings = [
        f"lakehouse.path={root}",
        *(f"lakehouse.storage_options.{k}={v}" for k, v in options(s3_endpoint).items()),
    ]
    config = job_config(tmp_path, broker, topic, *settings)
    caplog.set_level(logging.INFO)
    job.run_until_idle(spark, job.start(spark, config, once=True))
    assert not (tmp_path / "lakehouse").exists() and not Path("s3:").exists()  # nothing on the local disk

    opts = Storage.of(root, config.lakehouse.storage_options).delta_options()
    rows = {
        table: DeltaTable(f"{root}/{table}", storage_options=opts).to_pyarrow_table().to_pylist()
        for table in TABLES
    }
    assert len(rows["telemetry_raw"]) == len(valid)
    assert len({(r["kafka_partition"], r["kafka_offset"]) for r in rows["telemetry_raw"]}) == len(valid)
    assert len(rows["telemetry_quarantine"]) == len(MALFORMED)
    assert len({r["window_end"] for r in rows["partition_load"]}) == 2
    assert len(rows["partition_load"]) == 2 * len(generate(spec)["partitions"])
    assert len(rows["broker_load"]) == 2 * 5 and len(rows["broker_ranking"]) == 2 * 5
    plans = rows["balance_plans"]
    assert len(plans) == 2 and any(p["status"] == "proposed" for p in plans), plans
    for plan in plans:
        own = [a for a in rows["plan_actions"] if a["plan_id"] == plan["plan_id"]]
        assert sum(a["action"] == "leadership" for a in own) == (plan["leader_moves"] or 0)
    assert rows["quality_runs"], "the data contract's results land on S3 too"

    # balancer sql reads the tables back from S3 (Spark reads the files through the executors' pyarrow).
    code = balancer_cli(
        [
            "sql",
            *(a for s in settings for a in ("--set", s)),
            "SELECT (SELECT count(*) FROM telemetry_raw) AS raw, (SELECT count(*) FROM broker_ranking) "
            "AS ranked, (SELECT count(*) FROM balance_plans WHERE status = 'proposed') AS proposed",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    proposed = sum(p["status"] == "proposed" for p in plans)
    header, values = [line.strip("| ").split("|") for line in out.splitlines() if line.startswith("|")][:2]
    assert [h.strip() for h in header] == ["raw", "ranked", "proposed"]
    assert [int(v) for v in values] == [len(valid), 10, proposed], out

    # The balance-history notebook reads them too, in a kernel, its storage options from the job's config
    # file (BALANCER_CONFIG) and the lakehouse path from BALANCER_LAKEHOUSE.
    from notebook_runner import NOTEBOOKS, run_notebook

    config_file = tmp_path / "job.yaml"
    config_file.write_text(
        yaml.safe_dump({"lakehouse": {"path": root, "storage_options": config.lakehouse.storage_options}})
    )
    notebook = run_notebook(
        NOTEBOOKS / "balance_history.ipynb", root, {"plans": "len(plans)"}, config=config_file
    )
    assert notebook["plans"] == len(plans)

    # balancer export reads a plan's rows from S3 too.
    plan_id = next(p["plan_id"] for p in plans if p["status"] == "proposed")
    assert (
        balancer_cli(
            [
                "export",
                plan_id,
                "--out",
                str(tmp_path / "export"),
                *(a for s in settings for a in ("--set", s)),
            ]
        )
        == 0
    )
    assert (tmp_path / "export" / "run.sh").exists()
    out += capsys.readouterr().out

    # No credential in what the job logged or printed, nor in any table.
    logged = "\n".join(r.getMessage() for r in caplog.records) + out
    assert SECRET not in logged and KEY_ID not in logged
    assert not any(
        SECRET in str(v) or KEY_ID in str(v) for table in rows.values() for row in table for v in row.values()
    )
