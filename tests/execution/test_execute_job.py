"""End to end on three real Apache Kafka brokers: the job proposes a plan from telemetry that describes the
real cluster, ``balancer execute`` carries it out, and the job follows it to ``completed`` from the real
cluster's metadata. ``executor.mode: auto`` (the job starting ``balancer execute`` itself) is ``make run``'s
and is proven by its test (tests/test_demo_kafka.py: every action in place on its cluster, no throttle left).

The reporter here plays the brokers' metrics reporter: each simulated minute it reads the real topic's
replica lists, leaders and log sizes (Admin API) and sends v1 records with the test's traffic figures to
a metrics topic on the same cluster.
"""

from __future__ import annotations

import time

import pytest
from support import MINUTE, T0, job_config, produce

from balancer import telemetry as tm
from balancer.spark import job
from balancer.spark.lakehouse import Lakehouse
from execution.kafka_plans import (
    assignment,
    create_topic,
    execute,
    executions,
    fill,
    kill,
    log_sizes,
    start_execute,
    wait_for,
)

pytestmark = pytest.mark.integration

MB = 10**6
CLUSTER = "real-e2e"
CAPACITY = 50 * MB
RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c"}


def report(kafka, metrics_topic: str, topic: str, first: int, last: int, rates: dict[int, float]) -> None:
    """Minutes ``first``..``last`` of v1 telemetry for the real ``topic`` as it is placed now."""
    placed = assignment(kafka, topic)
    sizes = log_sizes(kafka, topic)
    records = []
    for minute in range(first, last + 1):
        ts = T0 + minute * MINUTE
        for broker, rack in RACKS.items():
            records.append(
                tm.broker_record(
                    ts=ts,
                    cluster=CLUSTER,
                    broker=broker,
                    rack=rack,
                    network_in=CAPACITY,
                    network_out=CAPACITY,
                    disk=1e12,
                )
            )
        for partition, (replicas, leader) in placed.items():
            for broker in replicas:
                records.append(
                    tm.partition_record(
                        ts=ts,
                        cluster=CLUSTER,
                        broker=broker,
                        topic=topic,
                        partition=partition,
                        leader=broker == leader,
                        replicas=replicas,
                        bytes_in=rates[partition],
                        bytes_out=rates[partition],
                        messages_in=rates[partition] / 1000,
                        size=float(sizes.get((partition, broker), sizes.get((partition, leader), 0))),
                    )
                )
    produce(kafka.bootstrap_servers, metrics_topic, records)


def busy_broker_1(kafka) -> tuple[str, dict[int, float]]:
    """A topic whose three busy partitions (24 MB each) all have a replica on broker 1, which leads them;
    its traffic figures (bytes/s per partition, small beside the throttles so they barely meter them)."""
    topic = create_topic(kafka, {0: [1, 2], 1: [1, 3], 2: [1, 2], 3: [2, 3], 4: [3, 2]})
    fill(kafka, topic, {0: 24 * MB, 1: 24 * MB, 2: 24 * MB, 3: 2 * MB, 4: 2 * MB})
    return topic, {0: 0.2 * MB, 1: 0.2 * MB, 2: 0.2 * MB, 3: 0.01 * MB, 4: 0.01 * MB}


def test_the_job_proposes_execute_carries_out_and_the_job_sees_it_complete(
    spark, kafka, kafka_topic, tmp_path
):
    """Runs on real Kafka: broker 1 holds a replica of every busy partition and leads them all; the job
    proposes a plan; execute is SIGKILLed after its first batch, the job sees the plan ``executing``;
    execute resumes and finishes, the job sees it ``completed``; every action's replicas and leader are on
    the real cluster and no throttle is left."""
    topic, rates = busy_broker_1(kafka)
    config = job_config(
        tmp_path,
        kafka.bootstrap_servers,
        kafka_topic,
        "executor.deadline=12 seconds",
        "executor.max_partition_moves_per_broker=1",
    )
    root = config.lakehouse.path
    house = Lakehouse(spark, root, engine="delta-rs")

    def run_job(first: int, last: int) -> None:
        report(kafka, kafka_topic, topic, first, last, rates)
        job.run_until_idle(spark, job.start(spark, config, once=True))

    def events(plan_id: str) -> list[str]:
        rows = house.select("plan_events", ["window_end", "status"], [("plan_id", "=", plan_id)]).to_pylist()
        return [r["status"] for r in sorted(rows, key=lambda r: r["window_end"])]

    started = time.monotonic()
    run_job(0, 6)
    proposed = house.select(
        "balance_plans", ["plan_id", "status", "replica_moves"], [("status", "=", "proposed")]
    )
    assert proposed.num_rows == 1, house.select("balance_plans", ["status", "reason"]).to_pylist()
    plan_id = proposed.column("plan_id")[0].as_py()
    actions = house.select(
        "plan_actions",
        ["action", "topic", "partition", "new_replicas", "new_leader"],
        [("plan_id", "=", plan_id)],
    ).to_pylist()
    batches = house.select("plan_batches", ["batch", "kind"], [("plan_id", "=", plan_id)]).to_pylist()
    assert any(a["action"] != "leadership" for a in actions), actions
    assert len(batches) >= 2, batches
    planned = time.monotonic()

    process = start_execute(root, kafka, plan_id, tmp_path / "first.log")
    try:
        wait_for(
            lambda: any(r["outcome"] == "completed" for r in executions(root, plan_id)), 180, "a first batch"
        )
    finally:
        kill(process)
    run_job(7, 11)
    assert events(plan_id) == ["executing"], events(plan_id)

    resumed = execute(root, kafka, plan_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    run_job(12, 16)
    assert events(plan_id) == ["executing", "completed"], events(plan_id)

    placed = assignment(kafka, topic)
    for a in actions:
        replicas, leader = placed[a["partition"]]
        assert set(replicas) == set(a["new_replicas"]) and leader == a["new_leader"], (a, placed)
    assert kafka.throttles([topic]) == {}
    rows = [r for r in executions(root, plan_id) if r["outcome"] == "completed"]
    assert sorted(r["batch"] for r in rows) == [b["batch"] for b in sorted(batches, key=lambda b: b["batch"])]
    print(
        f"\nplanned in {planned - started:.1f} s, plan of {len(actions)} actions in {len(batches)} batches; "
        + "; ".join(
            f"batch {r['batch']} ({r['kind']}): {r['measured_seconds']:.1f} s"
            + (f" / {r['estimated_seconds']:.1f} s estimated" if r["estimated_seconds"] else "")
            for r in sorted(rows, key=lambda r: r["batch"])
        )
    )
