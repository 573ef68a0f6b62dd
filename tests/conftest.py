"""Shared fixtures: one SparkSession per test session, one embedded broker, a temp dir per test."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

from balancer.jvm import short_lived_driver_options

# Spark's Python workers must run the venv interpreter, not whatever `python3` is on PATH.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# Every driver JVM a test starts, in this process or a subprocess (spark-submit.sh, `balancer run`), is
# short-lived: C1, the serial GC and the class-data archive from `make setup` (balancer.jvm).
os.environ.setdefault("SPARK_SUBMIT_OPTS", short_lived_driver_options())


@pytest.fixture(scope="session")
def spark():
    from balancer.spark.session import build_session

    session = build_session(
        master="local[2]",
        app_name="balancer-tests",
        conf={
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.session.timeZone": "UTC",
            "spark.driver.memory": "2g",
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def broker():
    from balancer.demo.embedded_broker import EmbeddedBroker

    with EmbeddedBroker() as running:
        yield running


@pytest.fixture(scope="session")
def kafka(tmp_path_factory):
    """Three real Apache Kafka brokers (KRaft, racks rack-a/b/c, SASL/SCRAM listener), once per session.

    Tests that run on them say so in their docstring; the JVMs die with the test process however it ends.
    """
    from balancer.demo.kafka_cluster import KafkaCluster

    with KafkaCluster(tmp_path_factory.mktemp("kafka")) as cluster:
        yield cluster


@pytest.fixture
def kafka_topic(kafka) -> str:
    """A fresh two-partition metrics topic per test on the real cluster."""
    name = f"metrics-{uuid.uuid4().hex[:10]}"
    kafka.create_topic(name, partitions=2)
    return name


@pytest.fixture
def topic(broker) -> str:
    """A fresh topic per test on the shared broker."""
    name = f"metrics-{uuid.uuid4().hex[:10]}"
    broker.create_topic(name, partitions=2)
    return name


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


# With TEST_WORKERS=2 each process takes the next module when it is free: a long module taken last keeps one
# process busy alone at the end. The longest (real brokers, spark-submit, the standalone cluster, real-clock
# windows) go first; the rest keep their order.
LONG_MODULES = (
    "test_cluster_path.py",
    "test_demo_kafka.py",
    "test_agent_kafka.py",
    "test_standalone.py",
    "test_execute_kafka.py",
    "test_recovery.py",
    "test_object_storage.py",
    "test_plan_lifecycle.py",
)

# Fixtures that start a JVM or brokers (embedded or real Kafka): a test using them (directly or through
# another fixture) is an integration test and must say so, so that `make test-unit` (-m "not integration")
# never starts them.
_HEAVY_FIXTURES = frozenset({"spark", "broker", "topic", "kafka", "kafka_topic"})


# In `make test`'s one Spark lane, the modules that meet real-time window deadlines on brokers of their own
# go last: by then the lane beside it (the no_spark tests, filling and copying topics) and the unit lane
# are done.
LATE_MODULES = ("test_standalone.py", "test_demo_kafka.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {name: i for i, name in enumerate(LONG_MODULES)}
        items.sort(key=lambda item: rank.get(item.path.name, len(LONG_MODULES)))
    else:
        late = {name: i + 1 for i, name in enumerate(LATE_MODULES)}
        items.sort(
            key=lambda item: (item.get_closest_marker("beside") is not None, late.get(item.path.name, 0))
        )
    unmarked = [
        item.nodeid
        for item in items
        if _HEAVY_FIXTURES & set(getattr(item, "fixturenames", ()))
        and item.get_closest_marker("integration") is None
    ]
    if unmarked:
        raise pytest.UsageError(
            "tests that start Spark or the broker must be marked integration: " + ", ".join(unmarked)
        )
    # `make test` runs the no_spark tests in a process of their own beside the Spark ones: a Spark session
    # there would be a second driver contending for the two cores.
    sparked = [
        item.nodeid
        for item in items
        if (item.get_closest_marker("no_spark") or item.get_closest_marker("beside"))
        and "spark" in getattr(item, "fixturenames", ())
    ]
    if sparked:
        raise pytest.UsageError(
            "tests marked no_spark or beside must not use the spark fixture: " + ", ".join(sparked)
        )
