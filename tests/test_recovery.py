"""Exactly once across driver crashes: `balancer run` as a subprocess, SIGKILLed mid-batch, restarted
on the same checkpoint, then drained with --once. Real Spark, three real Apache Kafka
brokers, real Delta tables.

Each crash happens at a chosen point, not at whatever moment a poll catches: the job runs under a
wrapper (``CRASHING_BALANCER``) that kills its own process group right after a chosen table's commit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from deltalake import DeltaTable
from support import T0, kill_group, start_job, tail, write_config

from balancer import telemetry as tm
from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.demo.simulator import SimulatedCluster

# The jobs run in subprocesses and meet no real-time deadline (each run drains what is on the topic):
# `make test` runs this module in the lane beside the Spark tests.
pytestmark = [pytest.mark.integration, pytest.mark.beside]


@pytest.fixture
def broker(kafka):
    """This module runs on the three real Apache Kafka brokers (the session's ``kafka`` fixture), in place
    of the embedded one: ``topic`` and the tests below get them through this name."""
    return kafka


def batch_ids(checkpoint: Path, log: str) -> set[int]:
    folder = checkpoint / log
    return {int(p.name) for p in folder.glob("[0-9]*")} if folder.is_dir() else set()


def in_flight(checkpoint: Path) -> bool:
    """A batch is planned (offsets/N) but not yet committed (no commits/N)."""
    offsets = batch_ids(checkpoint, "offsets")
    return bool(offsets) and max(offsets) not in batch_ids(checkpoint, "commits")


def delta_versions(table: Path) -> int:
    return len(list((table / "_delta_log").glob("*.json")))


# `balancer run` that SIGKILLs its whole process group (driver, JVM, Python workers) right after its sink
# commits a batch >= FIRST_BATCH to TABLE, i.e. before Spark records that batch in the checkpoint.
CRASHING_BALANCER = textwrap.dedent(
    """
    import os, signal, sys
    from balancer.cli.main import main
    from balancer.spark.lakehouse import Lakehouse

    TABLE, FIRST_BATCH = os.environ["CRASH_AFTER_COMMIT"].split(":")

    def crash_after(method, tables):
        def wrapped(self, *args, **kwargs):
            result = method(self, *args, **kwargs)
            if TABLE in tables(args) and kwargs["batch_id"] >= int(FIRST_BATCH):
                os.killpg(os.getpgrp(), signal.SIGKILL)
            return result
        return wrapped

    Lakehouse.append = crash_after(Lakehouse.append, lambda args: [args[0]])
    Lakehouse.append_routed = crash_after(Lakehouse.append_routed, lambda args: [r.table for r in args[1]])
    sys.argv[0] = "balancer"
    sys.exit(main())
    """
)


def start_crashing_job(config: Path, log: Path, tmp_path: Path, table: str, first_batch: int):
    script = tmp_path / "crashing_balancer.py"
    script.write_text(CRASHING_BALANCER)
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "CRASH_AFTER_COMMIT": f"{table}:{first_batch}",
        "BALANCER_LOG_FILE": str(log),  # Spark's logs and traces in the same file as the console
    }
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, str(script), "run", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )


def wait_crashed(proc: subprocess.Popen, log: Path, timeout: float, what: str) -> None:
    """Wait for the job to kill itself at its crash point; a job still running at ``timeout``, or one that
    ended any other way, fails the test."""
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise AssertionError(f"the job never reached its crash point ({what}):\n{tail(log)}") from None
    assert code == -signal.SIGKILL, f"job exited ({code}) before its crash point ({what}):\n{tail(log)}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the JVM and Python workers go with the driver
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"process group {proc.pid} survived its SIGKILL")


class Telemetry:
    """Produces simulated telemetry plus malformed records; remembers each one's Kafka coordinates."""

    BAD = (b"not json", b"", b'{"v":2,"type":"partition"}', b'{"v":1,"type":"partition","ts":"soon"}')

    def __init__(self, bootstrap: str, topic: str, cluster: SimulatedCluster):
        self.topic, self.cluster = topic, cluster
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.valid: set[tuple[int, int]] = set()
        self.bad: set[tuple[int, int]] = set()

    def _send(self, value: bytes, key: bytes, into: set) -> None:
        def delivered(err, msg):
            assert err is None, err
            into.add((msg.partition(), msg.offset()))

        self.producer.produce(self.topic, key=key, value=value, on_delivery=delivered)

    def minutes(self, first: int, last: int) -> None:
        for minute in range(first, last + 1):
            for i, record in enumerate(self.cluster.telemetry(T0 + minute * 60_000)):
                self._send(tm.encode(record), f"{record['cluster']}/{record['broker']}".encode(), self.valid)
                if i == 3:
                    self._send(self.BAD[minute % len(self.BAD)], b"bad", self.bad)
        assert self.producer.flush(30) == 0


def read_table(lakehouse: Path, table: str) -> list[dict]:
    return DeltaTable(str(lakehouse / table)).to_pyarrow_table().to_pylist()


def assert_unique(rows: list[dict], keys: tuple[str, ...], table: str) -> None:
    seen = [tuple(row[k] for k in keys) for row in rows]
    dupes = {k for k in seen if seen.count(k) > 1}
    assert not dupes, f"{table}: duplicate rows for {keys}: {sorted(dupes)[:5]}"


def test_exactly_once_across_driver_crashes(broker, topic, tmp_path):
    spec = ScenarioSpec(
        brokers=3,
        racks=0,
        topics=2,
        partitions_per_topic=(2, 3),
        replication_factor=2,
        total_bytes_in=30e6,
        new_empty_brokers=1,
        seed=11,
        cluster="crash-1",
    )
    cluster = SimulatedCluster(generate(spec), noise=0.0)
    data = Telemetry(broker.bootstrap_servers, topic, cluster)
    config = write_config(tmp_path, broker.bootstrap_servers, topic)
    ckpt = tmp_path / "checkpoints" / "balancer"
    lakehouse = tmp_path / "lakehouse"
    raw_table, load_table = lakehouse / "telemetry_raw", lakehouse / "partition_load"
    log = tmp_path / "job.log"

    # Run 1: killed right after batch 1's telemetry_raw commit, before that batch's checkpoint commit.
    data.minutes(0, 5)
    wait_crashed(start_crashing_job(config, log, tmp_path, "telemetry_raw", 1), log, 480, "raw commit")
    assert in_flight(ckpt) and max(batch_ids(ckpt, "offsets")) == 1
    assert batch_ids(ckpt, "commits") == {0}
    assert delta_versions(raw_table) == 1 + 2  # created, then batches 0 and 1: one ahead of the checkpoint

    # Run 2: killed in the batch that closes the first window, after partition_load but before the plans.
    data.minutes(6, 11)
    loads_before = delta_versions(load_table)
    wait_crashed(start_crashing_job(config, log, tmp_path, "partition_load", 0), log, 480, "partition_load")
    assert in_flight(ckpt) and delta_versions(load_table) == loads_before + 1
    assert read_table(lakehouse, "balance_plans") == []  # the crash came before any plan was written

    # Final run drains the topic.
    job = start_job(config, log, "--once")
    try:
        assert job.wait(timeout=600) == 0, tail(log)
    except subprocess.TimeoutExpired:
        kill_group(job)
        raise AssertionError(f"--once did not finish:\n{tail(log)}") from None
    print("batches:", len(batch_ids(ckpt, "commits")))

    raw = read_table(lakehouse, "telemetry_raw")
    assert_unique(raw, ("kafka_topic", "kafka_partition", "kafka_offset"), "telemetry_raw")
    assert {(r["kafka_partition"], r["kafka_offset"]) for r in raw} == data.valid
    assert {r["kafka_topic"] for r in raw} == {topic}
    quarantine = read_table(lakehouse, "telemetry_quarantine")
    assert_unique(quarantine, ("kafka_topic", "kafka_partition", "kafka_offset"), "telemetry_quarantine")
    assert {(r["kafka_partition"], r["kafka_offset"]) for r in quarantine} == data.bad

    window = ("cluster", "window_start", "window_end")
    partitions = read_table(lakehouse, "partition_load")
    assert_unique(partitions, (*window, "topic", "partition"), "partition_load")
    # Minutes 0-11, 1-minute watermark: exactly the windows [0,5) and [5,10), each with every partition.
    assert len({r["window_end"] for r in partitions}) == 2
    assert len(partitions) == 2 * len(cluster.partitions)
    brokers = read_table(lakehouse, "broker_load")
    assert_unique(brokers, (*window, "broker"), "broker_load")
    assert len(brokers) == 2 * len(cluster.brokers)
    ranking = read_table(lakehouse, "broker_ranking")
    assert_unique(ranking, (*window, "broker"), "broker_ranking")
    assert len(ranking) == 2 * len(cluster.brokers)
    plans = read_table(lakehouse, "balance_plans")
    assert_unique(plans, ("plan_id",), "balance_plans")
    assert len(plans) == 2
    # One plan at a time: the second window waits on the first's plan, crash or not.
    first, second = sorted(plans, key=lambda p: p["window_end"])
    # The empty broker makes the first window's plan propose moves, and nobody executes it.
    assert (first["status"], second["status"]) == ("proposed", "waiting"), (first, second)
    assert first["plan_id"] in second["reason"]
    assert_unique(read_table(lakehouse, "plan_batches"), ("plan_id", "batch"), "plan_batches")
    assert {b["plan_id"] for b in read_table(lakehouse, "plan_batches")} == {first["plan_id"]}
    assert_unique(read_table(lakehouse, "plan_events"), ("plan_id", "window_end"), "plan_events")
    actions = read_table(lakehouse, "plan_actions")
    assert_unique(actions, ("plan_id", "seq"), "plan_actions")
    for plan in plans:  # a replayed plan must not leave a second, different action list behind
        own = sorted(a["seq"] for a in actions if a["plan_id"] == plan["plan_id"])
        assert own == list(range(len(own)))
    print(json.dumps({"raw": len(raw), "quarantine": len(quarantine), "plans": [p["status"] for p in plans]}))
