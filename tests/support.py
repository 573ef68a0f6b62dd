"""Helpers shared by the integration tests: producing telemetry, and running the job as a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import yaml
from confluent_kafka import Producer

from balancer import telemetry as tm

T0 = 1_790_000_000_000 // 300_000 * 300_000  # a 5-minute window boundary, in 2026
MINUTE = 60_000
BALANCER = str(Path(sys.executable).parent / "balancer")


def produce(bootstrap: str, topic: str, values: Iterable[bytes | dict], **client) -> int:
    """Send raw values as they are and telemetry dicts encoded (keyed by cluster/broker, like brokers do)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **client})
    count = 0
    for value in values:
        if isinstance(value, dict):
            producer.produce(
                topic, key=f"{value['cluster']}/{value['broker']}".encode(), value=tm.encode(value)
            )
        else:
            producer.produce(topic, value=value)
        count += 1
    assert producer.flush(30) == 0
    return count


def minutes_of(cluster, first: int, last: int) -> list[dict]:
    """A simulated cluster's telemetry for minutes ``first``..``last`` after T0."""
    return [r for minute in range(first, last + 1) for r in cluster.telemetry(T0 + minute * MINUTE)]


def simulated(**spec):
    """A noiseless simulated cluster of a small generated scenario: 3 brokers without racks, 2 topics of
    2 partitions, RF 2, unless ``spec`` (``ScenarioSpec``'s fields) says otherwise."""
    from balancer.demo.scenarios import ScenarioSpec, generate
    from balancer.demo.simulator import SimulatedCluster

    shape = dict(brokers=3, racks=0, topics=2, partitions_per_topic=(2, 2), replication_factor=2)
    return SimulatedCluster(generate(ScenarioSpec(**{**shape, **spec})), noise=0.0)


def job_config(tmp_path: Path, bootstrap: str, topic: str, *overrides: str):
    """The typed config of an in-process test job on the embedded broker: delta-rs under ``tmp_path``,
    5-minute tumbling windows with a 1-minute watermark, no data contract (it has its own tests and costs
    seconds a batch). ``overrides`` are ``--set`` assignments applied after these, so they win."""
    from balancer.config import load_config

    return load_config(
        None,
        [
            f"source.bootstrap_servers={bootstrap}",
            f"source.topic={topic}",
            "source.unavailable_timeout=10 seconds",
            f"lakehouse.path={tmp_path / 'lakehouse'}",
            "lakehouse.engine=delta-rs",
            f"checkpoint.path={tmp_path / 'checkpoints'}",
            "windows.size=5 minutes",
            "windows.slide=5 minutes",
            "windows.watermark=1 minute",
            "quality.enabled=false",
            *overrides,
        ],
    )


def write_config(tmp_path: Path, bootstrap: str, topic: str, **sections) -> Path:
    """A --config file for a subprocess job: fast triggers, small batches, a light local[2] Spark."""
    config = {
        "source": {
            "bootstrap_servers": bootstrap,
            "topic": topic,
            "max_records_per_batch": 40,
            "unavailable_timeout": "20 seconds",
        },
        "lakehouse": {"path": str(tmp_path / "lakehouse"), "engine": "delta-rs"},
        "checkpoint": {"path": str(tmp_path / "checkpoints")},
        "windows": {"size": "5 minutes", "slide": "5 minutes", "watermark": "1 minute"},
        "trigger": {"interval": "1 second"},
        "quality": {"enabled": False},  # the data contract has its own tests; it costs seconds per batch
        "spark": {
            "master": "local[2]",
            "conf": {
                "spark.sql.shuffle.partitions": "2",
                "spark.ui.enabled": "false",
                "spark.driver.memory": "1g",
            },
        },
    }
    for section, values in sections.items():
        config.setdefault(section, {}).update(values)
    path = tmp_path / "balancer.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def start_job(config: Path, log: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env["BALANCER_LOG_FILE"] = str(log)  # Spark's logs and traces in the same file as the console
    with open(log, "ab") as out:  # the child keeps its own handle
        return subprocess.Popen(
            [BALANCER, "run", "--config", str(config), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the driver's whole process group (Python driver, JVM, Python workers) and wait it out."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"process group {proc.pid} survived SIGKILL")


def tail(log: Path, lines: int = 40) -> str:
    if not log.exists():
        return "(no log)"
    kept = [line for line in log.read_text(errors="replace").splitlines() if " WARN " not in line]
    return "\n".join(kept[-lines:])
