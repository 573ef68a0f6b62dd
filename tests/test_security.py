"""Security: source.options reach the Kafka client unchanged, and secrets stay out of logs, tables,
checkpoints and errors. The SASL tests run on the three real Apache Kafka brokers (`kafka` fixture: a
SASL_PLAINTEXT listener with SCRAM-SHA-256 and a user created when the storage was formatted); the others
on the embedded broker, which is all they need."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.errors import StreamingQueryException
from support import T0, simulated, start_job, tail, write_config

from balancer import telemetry as tm
from balancer.config import load_config
from balancer.spark import job

pytestmark = pytest.mark.integration

PASSWORD = "pw-Zq81-never-log-me"
KEY_PASSWORD = "keypw-Jx55-never-log-me"


def files_containing(root: Path, *secrets: str) -> list[str]:
    """Every file under ``root`` (tables, checkpoints, logs, plan files) holding one of ``secrets``,
    except the job's own --config file, which is where the operator put them."""
    needles = [s.encode() for s in secrets]
    return [
        str(p)
        for p in root.rglob("*")
        if p.is_file() and p.name != "balancer.yaml" and any(n in p.read_bytes() for n in needles)
    ]


def produce_cluster(bootstrap: str, topic: str, minutes: int, **client) -> int:
    cluster = simulated(partitions_per_topic=(2, 3), new_empty_brokers=1, cluster="sec")
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **client})
    count = 0
    for minute in range(minutes):
        for record in cluster.telemetry(T0 + minute * 60_000):
            producer.produce(topic, value=tm.encode(record))
            count += 1
    producer.produce(topic, value=b"not json")  # a quarantined record: its table must not leak either
    assert producer.flush(30) == 0
    return count


def test_ssl_options_reach_the_client_unchanged_and_errors_hide_the_key_password(
    spark, broker, topic, tmp_path
):
    ca = tmp_path / "no-such-dir" / "ca.pem"
    config = load_config(
        None,
        [
            f"source.bootstrap_servers={broker.bootstrap_servers}",
            f"source.topic={topic}",
            f"lakehouse.path={tmp_path / 'lakehouse'}",
            "lakehouse.engine=delta-rs",
            f"checkpoint.path={tmp_path / 'checkpoints'}",
            "source.unavailable_timeout=3 seconds",
            "quality.enabled=false",
            "source.options="
            + json.dumps(
                {"security.protocol": "SSL", "ssl.ca.location": str(ca), "ssl.key.password": KEY_PASSWORD}
            ),
        ],
    )
    with pytest.raises(StreamingQueryException) as failure:
        job.run_until_idle(spark, job.start(spark, config, once=True))
    message = str(failure.value)
    # librdkafka rejects the CA file: the SSL keys arrived as given (a dropped key would not fail at all).
    assert "Failed to create consumer: ssl.ca.location failed" in message, message
    assert "Kafka client options for" in message and "are invalid" in message  # named, not retried
    assert KEY_PASSWORD not in message
    assert not files_containing(tmp_path, KEY_PASSWORD)


@pytest.mark.beside  # the job runs in a subprocess and drains the topic: no real-time deadline
def test_secrets_in_source_options_never_reach_logs_tables_or_checkpoints(broker, topic, tmp_path):
    produced = produce_cluster(broker.bootstrap_servers, topic, minutes=12)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # Secret-bearing options that PLAINTEXT ignores, so the job runs end to end and writes plans.
    options = {
        "security.protocol": "PLAINTEXT",
        "sasl.username": "svc",
        "sasl.password": PASSWORD,
        "ssl.key.password": KEY_PASSWORD,
        "client.id": "balancer-security-test",
    }
    config = write_config(
        tmp_path,
        broker.bootstrap_servers,
        topic,
        source={"options": options},
        lakehouse={"path": str(run_dir / "lakehouse"), "engine": "delta-rs"},
        checkpoint={"path": str(run_dir / "checkpoints")},
        quality={"enabled": False},
    )
    log = run_dir / "job.log"
    proc = start_job(config, log, "--once")
    assert proc.wait(timeout=480) == 0, tail(log)

    from deltalake import DeltaTable

    lakehouse = run_dir / "lakehouse"
    assert len(DeltaTable(str(lakehouse / "telemetry_raw")).to_pyarrow_table()) == produced
    assert len(DeltaTable(str(lakehouse / "telemetry_quarantine")).to_pyarrow_table()) == 1
    assert len(DeltaTable(str(lakehouse / "balance_plans")).to_pyarrow_table()) == 2
    # The whole run folder: Delta data and logs, checkpoints (offsets, metadata, state), job log.
    assert not files_containing(run_dir, PASSWORD, KEY_PASSWORD)


@pytest.mark.beside  # the job runs in a subprocess
def test_sasl_bad_password_is_refused_with_a_clear_error_without_the_password(kafka, tmp_path):
    """Real Kafka: a wrong SCRAM password ends the job with one clear line that names the brokers."""
    options = {**kafka.sasl_options(PASSWORD)}
    config = write_config(
        tmp_path,
        kafka.sasl_bootstrap_servers,
        "metrics",
        source={"options": options, "unavailable_timeout": "5 seconds"},
    )
    log = tmp_path / "job.log"
    proc = start_job(config, log, "--once")
    assert proc.wait(timeout=300) != 0
    output = log.read_text(errors="replace")
    # The client's own log says why (the SASL options arrived unchanged: SCRAM was negotiated)...
    assert "SASL authentication error" in output and "SCRAM-SHA-256" in output, tail(log)
    # ...and the job's own error says so at once, naming the brokers, instead of "unavailable".
    assert f"authentication to Kafka brokers {kafka.sasl_bootstrap_servers} failed" in output, tail(log)
    assert PASSWORD not in output
    assert not files_containing(tmp_path, PASSWORD)


def test_sasl_login_end_to_end(spark, kafka, tmp_path):
    """Real Kafka: the job logs in with SCRAM on the SASL listener, lands every record, and the password
    is nowhere in what it wrote."""
    import uuid

    from balancer.spark.lakehouse import Lakehouse

    options = kafka.sasl_options()
    bootstrap = kafka.sasl_bootstrap_servers
    topic = f"balancer-sasl-test-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=2, replication_factor=3)
    produced = produce_cluster(bootstrap, topic, minutes=7, **options)
    config = load_config(
        None,
        [
            f"source.bootstrap_servers={bootstrap}",
            f"source.topic={topic}",
            f"lakehouse.path={tmp_path / 'lakehouse'}",
            "lakehouse.engine=delta-rs",
            f"checkpoint.path={tmp_path / 'checkpoints'}",
            "quality.enabled=false",
            f"source.options={json.dumps(options)}",
        ],
    )
    job.run_until_idle(spark, job.start(spark, config, once=True))
    raw = Lakehouse(spark, config.lakehouse.path, engine="delta-rs").read("telemetry_raw")
    assert raw.count() == produced
    assert not files_containing(tmp_path, options["sasl.password"])
