"""Broker faults and bad configuration, at the level of the whole job.

Source-level cases are in test_kafka_source."""

from __future__ import annotations

import subprocess
import time
from datetime import datetime

import pytest
from confluent_kafka import Producer
from pyspark.errors import StreamingQueryException
from support import BALANCER, T0, job_config, simulated, start_job, tail, write_config

from balancer import telemetry as tm
from balancer.demo.kafka_cluster import KafkaCluster
from balancer.demo.ports import free_port
from balancer.spark import job
from balancer.spark.lakehouse import Lakehouse

pytestmark = pytest.mark.integration

TIMEOUT_S = 5  # source.unavailable_timeout in these tests
ERROR_SLACK_S = 20  # beyond TIMEOUT_S, from the query's start to its failure: planning the first batch


@pytest.mark.parametrize(
    "override, key", [("windows.size=banana", "windows.size"), ("source.nope=1", "source.nope")]
)
def test_bad_config_exits_2_naming_the_key_before_spark_starts(override, key):
    started = time.monotonic()
    result = subprocess.run(
        [BALANCER, "run", "--once", "--set", override], capture_output=True, text=True, timeout=60
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 2, result.stderr
    assert key in result.stderr
    output = result.stdout + result.stderr
    assert "Spark" not in output and "log4j" not in output and "Traceback" not in output, output
    assert elapsed < 20, f"config error took {elapsed:.1f}s: a Spark session was probably started"


def test_no_reachable_kafka_at_start_fails_once_in_bounded_time(tmp_path):
    bootstrap = f"127.0.0.1:{free_port()}"  # nothing listens here
    config = write_config(
        tmp_path, bootstrap, "metrics", source={"unavailable_timeout": f"{TIMEOUT_S} seconds"}
    )
    log = tmp_path / "job.log"
    proc = start_job(config, log, "--once")
    try:
        code = proc.wait(timeout=180)  # JVM start-up + TIMEOUT_S; generous for a loaded 2-core machine
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"--once kept running without Kafka:\n{tail(log)}") from None
    output = log.read_text(errors="replace")
    assert code != 0
    assert f"Kafka brokers {bootstrap} unavailable for {TIMEOUT_S}s" in output, tail(log)
    # From the query's start to the failure: the source retries for the timeout, then the job fails
    # (the bound leaves Spark a loaded machine's time to plan the first batch; JVM start-up is before it).
    retried = _logged_at(output, "INFO balancer.spark.job: started query", "ERROR failure: ")
    assert TIMEOUT_S <= retried < TIMEOUT_S + ERROR_SLACK_S, f"failed {retried:.1f}s after the query started"


def _logged_at(output: str, first: str, last: str) -> float:
    """Seconds between the log file's line containing ``first`` and the next one containing ``last``."""
    stamps = []
    for marker in (first, last):
        line = next(line for line in output.splitlines() if marker in line)
        stamps.append(datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f"))
    return (stamps[1] - stamps[0]).total_seconds()


def _config(tmp_path, bootstrap, topic, **extra):
    return job_config(
        tmp_path,
        bootstrap,
        topic,
        f"source.unavailable_timeout={TIMEOUT_S} seconds",
        "trigger.interval=1 second",
        *(f"{k}={v}" for k, v in extra.items()),
    )


def _produce(bootstrap, topic, cluster, minutes) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    count = 0
    for minute in minutes:
        for record in cluster.telemetry(T0 + minute * 60_000):
            producer.produce(topic, value=tm.encode(record), partition=count % 2)
            count += 1
    assert producer.flush(30) == 0
    return count


def _committed(query) -> bool:
    return any(progress["numInputRows"] > 0 for progress in query.recentProgress)


def test_broker_lost_mid_stream_then_wiped_is_reported_not_skipped(spark, tmp_path):
    """A real Apache Kafka broker of its own (one KRaft node): stopped while the job streams, then started
    again with its storage formatted anew (``KafkaCluster.start`` wipes it), as a broker whose disks were
    lost comes back."""
    cluster = simulated(cluster="faults")
    topic = "metrics"
    with KafkaCluster(tmp_path / "kafka", size=1) as broker:
        broker.create_topic(topic, partitions=2)
        produced = _produce(broker.bootstrap_servers, topic, cluster, range(6))
        config = _config(tmp_path, broker.bootstrap_servers, topic)
        queries = job.start(spark, config)
        try:
            deadline = time.monotonic() + 120
            while not all(_committed(q) for q in queries):
                assert time.monotonic() < deadline, [q.lastProgress for q in queries]
                assert all(q.exception() is None for q in queries), [q.exception() for q in queries]
                time.sleep(0.5)

            # Broker gone while the job runs: each query fails after about source.unavailable_timeout.
            broker.stop()
            stopped = time.monotonic()
            for query in queries:
                with pytest.raises(StreamingQueryException) as failure:
                    query.awaitTermination(TIMEOUT_S + 90)
                message = str(failure.value)
                # "unavailable for 5s" from the driver, or "no records ... for 5s" from a reading task
                assert f"Kafka brokers {broker.bootstrap_servers}" in message, message
                assert f"for {TIMEOUT_S}s (kafkaUnavailableTimeoutMs)" in message, message
            elapsed = time.monotonic() - stopped
            assert TIMEOUT_S * 0.8 <= elapsed < TIMEOUT_S + 90, elapsed
        finally:
            for query in queries:
                if query.isActive:
                    query.stop()
        landed = Lakehouse(spark, config.lakehouse.path, engine="delta-rs").read("telemetry_raw").count()
        assert landed == produced  # everything read before the loss had landed

        # The broker comes back empty (memory storage): same topic, fewer new records than were read.
        # Restarted on the same checkpoint, the source must report offsets going backwards. (A wiped
        # partition that has already grown past the checkpoint's offset is NOT detectable without
        # leader epochs, which neither this broker nor the source has; so the test keeps it smaller.)
        broker.start()
        broker.create_topic(topic, partitions=2)
        _produce(broker.bootstrap_servers, topic, cluster, [6])
        with pytest.raises(StreamingQueryException) as failure:
            job.run_until_idle(spark, job.start(spark, config, once=True))
        message = str(failure.value)
        assert "Data loss on topic 'metrics' partition" in message, message
        assert "the broker lost data, or the topic was deleted/recreated" in message


def _produce_cc(bootstrap, topic, cluster, minutes) -> int:
    """Cruise Control reporter records of the simulated cluster's minutes (the format that polls topology)."""
    from balancer.demo.cc_reporter import from_telemetry

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    count = 0
    for minute in minutes:
        for key, value in from_telemetry(cluster.telemetry(T0 + minute * 60_000)):
            producer.produce(topic, key=key, value=value)
            count += 1
    assert producer.flush(30) == 0
    return count


def test_a_broker_of_three_stopped_and_restarted_mid_stream_loses_nothing(spark, kafka, tmp_path, caplog):
    """Real Kafka: one of three brokers is killed while the job streams and started again later. The job
    keeps reading from the partitions' new leaders, says the broker left and came back (its Admin API
    topology poll), and lands every record exactly once. Hour-long windows: none closes during the test,
    whose subject is the stream, not the plans."""
    import json
    import logging

    from balancer.demo.cc_reporter import capacity_file

    cluster = simulated(cluster="faults-real")
    topic = f"metrics-{time.monotonic_ns()}"
    kafka.create_topic(topic, partitions=2, replication_factor=3)
    (tmp_path / "capacity.json").write_text(json.dumps(capacity_file(cluster.snapshot())))
    produced = _produce_cc(kafka.bootstrap_servers, topic, cluster, range(3))
    config = _config(
        tmp_path,
        kafka.bootstrap_servers,
        topic,
        **{
            "source.format": "cruise-control",
            "source.cluster": "faults-real",
            "metadata.source": "kafka",
            "metadata.interval": "1 second",
            "capacity.path": str(tmp_path / "capacity.json"),
            "windows.size": "1 hour",
            "windows.slide": "1 hour",
            # librdkafka's metadata request to the killed broker waits out its socket timeout first: the
            # job must tolerate that, as it does by default (60 s), not this module's 5 s.
            "source.unavailable_timeout": "60 seconds",
        },
    )
    caplog.set_level(logging.WARNING, logger="balancer")
    queries = job.start(spark, config)
    lakehouse = Lakehouse(spark, config.lakehouse.path, engine="delta-rs")

    def wait_landed(count: int, what: str) -> None:
        deadline = time.monotonic() + 300
        while lakehouse.read("telemetry_raw").count() < count:
            assert time.monotonic() < deadline, f"{what}: not landed in 300 s"
            assert all(q.exception() is None for q in queries), [q.exception() for q in queries]
            time.sleep(1)

    try:
        wait_landed(produced, "before the fault")
        kafka.stop_node(3, kill=True)
        produced += _produce_cc(kafka.bootstrap_servers, topic, cluster, range(3, 6))
        wait_landed(produced, "with broker 3 down")
        kafka.start_node(3)
        produced += _produce_cc(kafka.bootstrap_servers, topic, cluster, range(6, 8))
        wait_landed(produced, "after broker 3 returned")
        assert all(q.isActive and q.exception() is None for q in queries)
    finally:
        kafka.start_node(3)  # the session's other tests see three brokers
        for query in queries:
            if query.isActive:
                query.stop()
    raw = lakehouse.read("telemetry_raw")
    assert raw.count() == produced
    assert raw.select("kafka_partition", "kafka_offset").distinct().count() == produced  # none twice
    said = [r.getMessage() for r in caplog.records]
    left = "broker(s) 3 left Kafka cluster faults-real (live: 1, 2)"
    back = "broker(s) 3 joined Kafka cluster faults-real (live: 1, 2, 3)"
    assert any(left in m for m in said) and any(back in m for m in said), said
