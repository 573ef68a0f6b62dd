"""What the executor tests on real Kafka share: skewed topics with real data, plans written to a delta-rs
lakehouse by the tables' own writers (``Lakehouse.append``, the job's ``tracking.batch_rows``), running
``balancer execute`` as a process. Throttles are read back with ``KafkaCluster.throttles`` (confluent-kafka:
another client than the executor's, so a check does not share its reading of the answer)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from deltalake import DeltaTable

from balancer.config import load_config
from balancer.planner import Action
from balancer.spark.lakehouse import Lakehouse, arrow_schema
from balancer.spark.track import tracking

BALANCER = str(Path(sys.executable).parent / "balancer")
ROOT = Path(__file__).resolve().parents[2]
KAFKA_BIN = ROOT / "bin"
MB = 10**6
CAPACITY = 100 * MB  # bytes/s per broker and direction in the plan's window: spare far above the throttles
WINDOW = datetime(2026, 11, 25, 20, 0, tzinfo=UTC)


def create_topic(kafka, assignment: dict[int, list[int]]) -> str:
    """A topic placed exactly as ``assignment`` says (partition -> replicas, leader first)."""
    name = f"skew-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(name, assignment=[assignment[p] for p in sorted(assignment)])
    return name


def fill(kafka, topic: str, sizes: dict[int, int]) -> None:
    """``sizes[p]`` bytes into partition p: incompressible values, no compression, big batches, acks=all (so
    every replica holds them before the plan moves any)."""
    producer = Producer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "acks": "all",
            "compression.type": "none",
            "linger.ms": 20,
            "batch.size": 900_000,
            "queue.buffering.max.kbytes": 65536,
        }
    )
    value = os.urandom(250_000)
    for partition, size in sizes.items():
        for _ in range(max(1, size // len(value))):
            while True:
                try:
                    producer.produce(topic, value=value, partition=partition)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
    assert producer.flush(120) == 0


def log_sizes(kafka, topic: str) -> dict[tuple[int, int], int]:
    """(partition, broker) -> bytes of that replica's log (DescribeLogDirs)."""
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers.split(","))
    try:
        out = {}
        for entry in client.describe_log_dirs(brokers=[1, 2, 3]):
            for log_dir in entry["log_dirs"]:
                for t in log_dir["topics"]:
                    if t["name"] == topic:
                        for p in t["partitions"]:
                            out[(p["partition_index"], entry["broker"])] = p["partition_size"]
        return out
    finally:
        client.close()


def cancel_reassignments(kafka, topic: str) -> None:
    """Cancel every reassignment of ``topic`` in progress and wait until the cluster lists none."""
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers.split(","))
    try:
        moving = [tp for tp in client.list_partition_reassignments() if tp.topic == topic]
        if moving:
            client.alter_partition_reassignments({tp: None for tp in moving})
        wait_for(
            lambda: not [tp for tp in client.list_partition_reassignments() if tp.topic == topic],
            60,
            f"{topic}'s reassignments to be cancelled",
        )
    finally:
        client.close()


def admin(kafka) -> AdminClient:
    """A confluent-kafka admin client that keeps librdkafka's informational lines off the test output."""
    return AdminClient({"bootstrap.servers": kafka.bootstrap_servers, "log_level": 3})


def assignment(kafka, topic: str) -> dict[int, tuple[list[int], int]]:
    """partition -> (replicas in order, leader), from the cluster's metadata."""
    meta = admin(kafka).list_topics(topic, timeout=10).topics[topic]
    return {p: (list(m.replicas), m.leader) for p, m in meta.partitions.items()}


def lakehouse(root: Path) -> Lakehouse:
    """The tables under ``root`` through the product's delta-rs writer (no Spark session is needed)."""
    house = Lakehouse(None, root, engine="delta-rs")  # type: ignore[arg-type]
    house.create_all()
    return house


def table_rows(root: Path, table: str) -> pa.Table:
    """All of ``table`` under ``root``, read with delta-rs."""
    return DeltaTable(lakehouse(root).path(table)).to_pyarrow_table()


def write_plan(
    root: Path,
    actions: Sequence[Action],
    *,
    deadline_seconds: float,
    tables: Sequence[str] = ("balance_plans", "plan_actions", "plan_batches"),
    max_moves_per_broker: int = 1,
    plan_id: str | None = None,
) -> str:
    """A proposed plan of ``actions`` in the lakehouse at ``root``, as the job writes it: its balance_plans
    row, its plan_actions and its plan_batches (batches and throttles by the job's own
    ``tracking.batch_rows`` for ``deadline_seconds``, with brokers far below capacity and no produce
    traffic). ``tables``: only those (a plan caught half-written)."""
    plan_id = plan_id or str(uuid.uuid4())
    house = lakehouse(root)
    config = load_config(
        overrides=[
            f"executor.deadline={deadline_seconds} seconds",
            f"executor.max_partition_moves_per_broker={max_moves_per_broker}",
        ]
    )
    moved = [a for a in actions if a.kind != "leadership"]
    plan_row = {
        "plan_id": plan_id,
        "cluster": "real",
        "created_at": WINDOW,
        "window_start": WINDOW - timedelta(minutes=5),
        "window_end": WINDOW,
        "status": "proposed",
        "leader_moves": sum(1 for a in actions if a.kind == "leadership"),
        "replica_moves": sum(a.moved_replicas for a in moved),
        "bytes_to_move": sum(a.bytes_to_move for a in actions),
    }
    action_rows = [{"plan_id": plan_id, "cluster": "real", **a.row(seq)} for seq, a in enumerate(actions)]
    info = tracking.PlanInfo(
        plan_id, "real", 0, int(WINDOW.timestamp() * 1000), "proposed", tuple(actions), {}, {}
    )
    brokers = [
        {
            "broker": b,
            "network_in": 0.0,
            "network_out": 0.0,
            "capacity_network_in": CAPACITY,
            "capacity_network_out": CAPACITY,
        }
        for b in (1, 2, 3)
    ]
    traffic = {(a.topic, a.partition): 0.0 for a in moved}
    batch_rows = tracking.batch_rows(info, brokers, traffic, config)
    rows = {"balance_plans": [plan_row], "plan_actions": action_rows, "plan_batches": batch_rows}
    for number, table in enumerate(tables):
        house.append(table, arrow_rows(table, rows[table]), app_id=f"test-{plan_id}", batch_id=number)
    return plan_id


def add_tables(
    root: Path, plan_id: str, actions: Sequence[Action], *, deadline_seconds: float, tables
) -> None:
    """The rest of a half-written plan (same rows as :func:`write_plan` makes)."""
    scratch = root.parent / f"scratch-{uuid.uuid4().hex[:6]}"
    write_plan(scratch, actions, deadline_seconds=deadline_seconds, plan_id=plan_id)
    house = lakehouse(root)
    for number, table in enumerate(tables):
        data = table_rows(scratch, table)
        house.append(table, data, app_id=f"rest-{plan_id}", batch_id=number)


def arrow_rows(table: str, rows: list[dict]) -> pa.Table:
    schema = arrow_schema(table)
    return pa.Table.from_pylist([{n: r.get(n) for n in schema.names} for r in rows], schema=schema)


def executions(root: Path, plan_id: str) -> list[dict]:
    rows = table_rows(root, "plan_executions").to_pylist()
    return sorted((r for r in rows if r["plan_id"] == plan_id), key=lambda r: r["recorded_at"])


def batches(root: Path, plan_id: str) -> list[dict]:
    rows = table_rows(root, "plan_batches").to_pylist()
    return sorted((r for r in rows if r["plan_id"] == plan_id), key=lambda r: r["batch"])


def execute_command(root: Path, kafka, plan_id: str, *args: str) -> list[str]:
    return [
        BALANCER,
        "execute",
        plan_id,
        *args,
        "--set",
        f"lakehouse.path={root}",
        "--set",
        f"executor.bootstrap_servers={kafka.bootstrap_servers}",
        "--set",
        "executor.poll_interval=0.5 seconds",
    ]


def execute(root: Path, kafka, plan_id: str, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        execute_command(root, kafka, plan_id, *args), capture_output=True, text=True, timeout=timeout
    )


def start_execute(root: Path, kafka, plan_id: str, log: Path, *args: str) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(
            execute_command(root, kafka, plan_id, *args),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def kill(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def wait_for(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
