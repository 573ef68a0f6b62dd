"""``balancer execute`` and the exported ``run.sh`` carrying plans out on three real Apache Kafka brokers.

Every test here runs on real Kafka (the session's ``kafka`` fixture: three KRaft brokers) with real data:
skewed topics whose moved partitions hold 24 MB each, produced uncompressed, so that the computed
throttles (about 5 MB/s) decide how long a batch takes. Plans are written to a delta-rs lakehouse by the
tables' own writer and the job's own batch/throttle rows (``kafka_plans.write_plan``).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import UTC, datetime

import pytest

from balancer.execution.kafka_admin import KafkaPythonAdmin
from balancer.planner import Action
from execution.kafka_plans import (
    BALANCER,
    KAFKA_BIN,
    WINDOW,
    add_tables,
    arrow_rows,
    assignment,
    batches,
    cancel_reassignments,
    create_topic,
    execute,
    executions,
    fill,
    kill,
    lakehouse,
    log_sizes,
    start_execute,
    wait_for,
    write_plan,
)

pytestmark = [pytest.mark.integration, pytest.mark.no_spark]

MB = 10**6
BIG = 24 * MB
DEADLINE = 10.0  # seconds for the plan's two replica batches: ~5 s each at ~5 MB/s


def skewed(kafka) -> tuple[str, list[Action]]:
    """A topic with broker 1 leading both big partitions, and the plan that spreads them:

    batch 0 (leadership): partition 2's leadership 2 -> 1 (a reorder and a preferred election);
    batch 1: partition 0 from [1, 2] to [3, 2] (24 MB to broker 3);
    batch 2: partition 1 from [1, 3] to [2, 3] (24 MB to broker 2).
    Broker 1 sends both copies, so one move per broker per batch puts them in two batches."""
    topic = create_topic(kafka, {0: [1, 2], 1: [1, 3], 2: [2, 1], 3: [1, 2]})
    fill(kafka, topic, {0: BIG, 1: BIG, 2: 2 * MB, 3: 2 * MB})
    sizes = log_sizes(kafka, topic)
    actions = [
        Action("leadership", topic, 2, (2, 1), (1, 2), 2, 1, 0),
        Action("replica_move", topic, 0, (1, 2), (3, 2), 1, 3, sizes[(0, 1)]),
        Action("replica_move", topic, 1, (1, 3), (2, 3), 1, 2, sizes[(1, 1)]),
    ]
    assert min(sizes[(0, 1)], sizes[(1, 1)]) >= 20 * MB, sizes
    return topic, actions


def assert_plan_applied(kafka, topic: str) -> None:
    placed = assignment(kafka, topic)
    assert set(placed[0][0]) == {3, 2} and placed[0][1] == 3, placed
    assert set(placed[1][0]) == {2, 3} and placed[1][1] == 2, placed
    assert placed[2] == ([1, 2], 1), placed
    assert placed[3] == ([1, 2], 1), placed


def completed(rows) -> list[int]:
    return sorted(r["batch"] for r in rows if r["outcome"] == "completed")


def test_execute_moves_replicas_and_leaders_at_the_batch_throttle_and_leaves_none(kafka, tmp_path):
    """Runs on real Kafka: every batch done, leaders and replicas where the plan says, each replica batch's
    throttle seen on exactly its brokers and replicas while it ran, none left afterwards (DescribeConfigs),
    and the measured durations beside the estimates in plan_executions."""
    topic, actions = skewed(kafka)
    root = tmp_path / "lh"
    plan_id = write_plan(root, actions, deadline_seconds=DEADLINE)
    planned = batches(root, plan_id)
    started = time.monotonic()
    process = start_execute(root, kafka, plan_id, tmp_path / "execute.log")
    seen = []
    while process.poll() is None:
        snapshot = kafka.throttles([topic])
        if snapshot and snapshot not in seen:
            seen.append(snapshot)
        time.sleep(0.3)
    output = (tmp_path / "execute.log").read_text()
    assert process.returncode == 0, output
    elapsed = time.monotonic() - started
    assert_plan_applied(kafka, topic)
    assert kafka.throttles([topic]) == {}

    rate = {b["batch"]: b["throttle"] for b in planned}
    batch1 = {f"broker {b}" for b in (1, 3)}
    # Batch 1 moves partition 0 from broker 1 to broker 3: brokers 1 and 3 throttled, nothing on broker 2.
    # Broker and topic configs are separate resources that brokers apply one after the other, so a snapshot
    # may catch the brokers' rates before the topic's replica lists: the batch's state is the one with both.
    during1 = [
        s for s in seen if {k for k in s if k.startswith("broker")} == batch1 and f"topic {topic}" in s
    ]
    assert during1, seen
    assert during1[0][f"topic {topic}"] == {
        "leader.replication.throttled.replicas": "0:1,0:2",
        "follower.replication.throttled.replicas": "0:3",
    }
    assert int(during1[0]["broker 3"]["follower.replication.throttled.rate"]) == json.loads(rate[1])["3"]

    rows = executions(root, plan_id)
    assert completed(rows) == [0, 1, 2]
    done = {r["batch"]: r for r in rows if r["outcome"] == "completed"}
    for index in (1, 2):
        row = done[index]
        assert json.loads(row["throttle"]) == json.loads(rate[index])
        assert row["duration_ratio"] == pytest.approx(row["measured_seconds"] / row["estimated_seconds"])
        # An unthrottled copy of 24 MB on loopback takes well under a second: the throttle held it back.
        assert row["measured_seconds"] > 0.5 * row["estimated_seconds"], row
    print(
        f"\nexecute: {elapsed:.1f} s; "
        + "; ".join(
            f"batch {i}: {done[i]['measured_seconds']:.1f} s measured / {done[i]['estimated_seconds']:.1f} s "
            f"estimated = {done[i]['duration_ratio']:.2f}"
            for i in (1, 2)
        )
    )


def test_run_sh_from_export_carries_the_plan_out_with_kafkas_own_tools(kafka, tmp_path):
    """Runs on real Kafka: ``balancer export``'s run.sh, unchanged, with Kafka's own
    kafka-reassign-partitions, kafka-configs and kafka-leader-election (bin/ wrappers over jvm/lib/kafka):
    the plan applied, no throttle left."""
    topic, actions = skewed(kafka)
    root = tmp_path / "lh"
    plan_id = write_plan(root, actions, deadline_seconds=DEADLINE)
    out = tmp_path / "plan"
    exported = subprocess.run(
        [BALANCER, "export", plan_id, "--out", str(out), "--set", f"lakehouse.path={root}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert exported.returncode == 0, exported.stderr
    started = time.monotonic()
    ran = subprocess.run(
        [str(out / "run.sh"), kafka.bootstrap_servers],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "KAFKA_BIN": str(KAFKA_BIN), "VERIFY_INTERVAL": "1"},
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "all batches done" in ran.stdout
    assert_plan_applied(kafka, topic)
    assert kafka.throttles([topic]) == {}
    print(f"\nrun.sh: {time.monotonic() - started:.1f} s")


def test_sigkill_mid_batch_then_resume_finishes_without_redoing_a_batch(kafka, tmp_path):
    """Runs on real Kafka: the executor is SIGKILLed in the middle of batch 1 (its throttles are still on the
    cluster then); started again, it removes them first, finishes batch 1 and 2, and does not run batch 0
    again; no throttle is left."""
    topic, actions = skewed(kafka)
    root = tmp_path / "lh"
    plan_id = write_plan(root, actions, deadline_seconds=DEADLINE)
    process = start_execute(root, kafka, plan_id, tmp_path / "first.log")
    try:
        wait_for(
            lambda: any(r["batch"] == 1 and r["outcome"] == "started" for r in executions(root, plan_id)),
            120,
            "batch 1 to start",
        )
        wait_for(lambda: log_sizes(kafka, topic).get((0, 3), 0) > 2 * MB, 60, "batch 1 to copy some data")
    finally:
        kill(process)
    assert kafka.throttles([topic]), "the killed run left no throttle: the kill came too late"
    first_run = executions(root, plan_id)
    assert completed(first_run) == [0]

    resumed = execute(root, kafka, plan_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    rows = executions(root, plan_id)
    assert completed(rows) == [0, 1, 2]
    later = rows[len(first_run) :]
    assert not [r for r in later if r["batch"] == 0], later
    assert [r["outcome"] for r in later if r["batch"] == 1] == ["interrupted", "started", "completed"]
    assert_plan_applied(kafka, topic)
    assert kafka.throttles([topic]) == {}


def test_throttles_a_killed_run_left_are_removed_first_even_when_the_plan_may_not_go_on(kafka, tmp_path):
    """Runs on real Kafka: the executor is SIGKILLed mid-batch (throttles on the cluster, recorded in
    plan_executions), then the job marks the plan superseded. The next execute refuses to go on, but
    removes the killed run's throttles before refusing, and records the batch interrupted."""
    topic, actions = skewed(kafka)
    root = tmp_path / "lh"
    plan_id = write_plan(root, actions, deadline_seconds=DEADLINE * 4)
    process = start_execute(root, kafka, plan_id, tmp_path / "first.log")
    try:
        wait_for(lambda: "broker 3" in kafka.throttles([topic]), 120, "batch 1's throttles")
    finally:
        kill(process)
    assert kafka.throttles([topic]), "the killed run left no throttle: the kill came too late"
    supersede(root, plan_id)
    refused = execute(root, kafka, plan_id)
    assert refused.returncode == 1 and "superseded" in refused.stderr, refused.stdout + refused.stderr
    assert kafka.throttles([topic]) == {}
    assert [r["outcome"] for r in executions(root, plan_id) if r["batch"] == 1] == ["started", "interrupted"]
    # The killed run may have started its reassignment (it runs on, now unthrottled) or not: either way
    # none may be left for the next test to find foreign.
    cancel_reassignments(kafka, topic)


def supersede(root, plan_id: str) -> None:
    """The job's plan_events row saying the plan was superseded."""
    event = {
        "plan_id": plan_id,
        "cluster": "real",
        "window_end": WINDOW,
        "status": "superseded",
        "recorded_at": datetime.now(UTC),
    }
    lakehouse(root).append("plan_events", arrow_rows("plan_events", [event]), app_id="job", batch_id=1)


def test_broker_stopped_mid_batch_stalls_safely_and_the_plan_resumes_when_it_returns(kafka, tmp_path):
    """Runs on real Kafka: broker 3, which receives batch 1's replica, is stopped mid-batch. The executor
    reports the stall, cancels the batch (partition 0 back on [1, 2]) and removes the throttles it can
    reach (the topic's and brokers 1 and 2's; broker 3's own rate waits for it). With broker 3 back, the
    next run removes that rate first and completes the plan; no throttle is left."""
    topic, actions = skewed(kafka)
    root = tmp_path / "lh"
    plan_id = write_plan(root, actions, deadline_seconds=DEADLINE * 2)
    process = start_execute(root, kafka, plan_id, tmp_path / "first.log")
    # kafka-python keeps the first "controller" a KRaft cluster names (any broker); one that has
    # broker 3 in mind must still answer once broker 3 is gone, as the executor's may, by chance.
    pinned = KafkaPythonAdmin(kafka.bootstrap_servers)
    pinned.reassignments()
    pinned.client._controller_id = 3
    try:
        wait_for(lambda: log_sizes(kafka, topic).get((0, 3), 0) > 2 * MB, 120, "batch 1 to copy some data")
        kafka.stop_node(3)
        assert set(pinned.reassignments()) <= {(topic, 0)}  # raises UnknownBrokerIdError unless re-asked
        code = process.wait(timeout=180)
        output = (tmp_path / "first.log").read_text()
        assert code == 1, output
        assert "batch 1 stalled" in output and "broker(s) [3]" in output, output
        assert [r["outcome"] for r in executions(root, plan_id) if r["batch"] == 1] == ["started", "stalled"]
        assert set(assignment(kafka, topic)[0][0]) == {1, 2}
        assert kafka.throttles([topic], brokers=(1, 2)) == {}
    finally:
        pinned.close()
        if process.poll() is None:
            kill(process)
        kafka.start_node(3)
    assert "broker 3" in kafka.throttles([topic]), "broker 3's rate should wait for it to return"
    resumed = execute(root, kafka, plan_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert completed(executions(root, plan_id)) == [0, 1, 2]
    assert_plan_applied(kafka, topic)
    assert kafka.throttles([topic]) == {}


def test_a_reassignment_started_by_someone_else_makes_execute_refuse_naming_it(kafka, tmp_path):
    """Runs on real Kafka: a throttled reassignment of another topic is in progress; execute refuses before
    changing anything and names the partition and its target."""
    from kafka import TopicPartition
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient

    other = create_topic(kafka, {0: [1, 2]})
    fill(kafka, other, {0: 8 * MB})
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers.split(","))
    slow = {"leader.replication.throttled.rate": "20000", "follower.replication.throttled.rate": "20000"}
    try:
        admin.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.BROKER,
                    str(b),
                    configs={k: (AlterConfigOp.SET, v) for k, v in slow.items()},
                )
                for b in (1, 2, 3)
            ]
            + [
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    other,
                    configs={
                        "leader.replication.throttled.replicas": (AlterConfigOp.SET, "0:1,0:2"),
                        "follower.replication.throttled.replicas": (AlterConfigOp.SET, "0:3"),
                    },
                )
            ],
            raise_on_unknown=False,
            incremental=True,
        )
        # The brokers apply dynamic configs a moment after the call returns: a reassignment started before
        # they throttle it copies the 8 MB at once and is over before execute looks.
        throttled = {f"broker {b}" for b in (1, 2, 3)} | {f"topic {other}"}
        wait_for(lambda: throttled <= set(kafka.throttles([other])), 30, "the throttles applied")
        admin.alter_partition_reassignments({TopicPartition(other, 0): [3, 2]})
        topic, actions = skewed(kafka)
        # The premise: it is still in progress when execute starts.
        assert TopicPartition(other, 0) in admin.list_partition_reassignments()
        root = tmp_path / "lh"
        plan_id = write_plan(root, actions, deadline_seconds=DEADLINE)
        before = assignment(kafka, topic)
        refused = execute(root, kafka, plan_id)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert f"{other}-0 to [3, 2]" in refused.stderr, refused.stderr
        assert "did not start" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert assignment(kafka, topic) == before
        rows = executions(root, plan_id)
        assert [r for r in rows if r["batch"] >= 0] == [], rows  # no batch was started
        assert [r["outcome"] for r in rows] == ["running", "released"], rows  # its claim, let go
    finally:
        admin.alter_partition_reassignments({TopicPartition(other, 0): None})
        admin.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.BROKER, str(b), configs={k: (AlterConfigOp.DELETE, None) for k in slow}
                )
                for b in (1, 2, 3)
            ]
            + [
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    other,
                    configs={
                        k: (AlterConfigOp.DELETE, None)
                        for k in (
                            "leader.replication.throttled.replicas",
                            "follower.replication.throttled.replicas",
                        )
                    },
                )
            ],
            raise_on_unknown=False,
            incremental=True,
        )
        admin.close()


def test_a_plan_is_not_acted_on_until_its_actions_and_batches_are_all_committed(kafka, tmp_path):
    """Runs on real Kafka: with only the plan's balance_plans row committed, then also its plan_actions,
    execute refuses and changes nothing; once plan_batches is committed it carries the plan out."""
    topic = create_topic(kafka, {0: [2, 1]})
    fill(kafka, topic, {0: 2 * MB})
    actions = [Action("leadership", topic, 0, (2, 1), (1, 2), 2, 1, 0)]
    root = tmp_path / "lh"
    plan_id = write_plan(root, actions, deadline_seconds=DEADLINE, tables=("balance_plans",))
    for missing in (("plan_actions",), ("plan_batches",)):
        refused = execute(root, kafka, plan_id)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "is not whole in the lakehouse yet" in refused.stderr, refused.stderr
        assert assignment(kafka, topic)[0] == ([2, 1], 2)
        assert executions(root, plan_id) == []
        add_tables(root, plan_id, actions, deadline_seconds=DEADLINE, tables=missing)
    ran = execute(root, kafka, plan_id)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert assignment(kafka, topic)[0] == ([1, 2], 1)


def test_a_second_execute_is_refused_while_a_run_holds_the_plan_and_stop_cancels_its_batch(kafka, tmp_path):
    """Runs on real Kafka: while a slow batch copies, a second ``execute`` of the plan refuses, naming the
    run that holds it, and leaves that batch's throttles and record as they are (its clean-up would have
    removed them). Then ``execute --stop``: the running executor ends, the reassignment is cancelled
    (partition 0 back on [1, 2]), no throttle is left, and the record says stopped."""
    topic, actions = skewed(kafka)
    root = tmp_path / "lh"
    plan_id = write_plan(root, actions, deadline_seconds=120)  # ~0.4 MB/s: the batch is still running
    process = start_execute(root, kafka, plan_id, tmp_path / "run.log")
    try:
        wait_for(lambda: "broker 3" in kafka.throttles([topic]), 120, "batch 1's throttles")
        throttled = kafka.throttles([topic])
        second = execute(root, kafka, plan_id)
        assert second.returncode == 1, second.stdout + second.stderr
        assert "is being executed by run" in second.stderr and f"pid {process.pid} " in second.stderr, (
            second.stderr
        )
        assert kafka.throttles([topic]) == throttled
        assert [r["outcome"] for r in executions(root, plan_id) if r["batch"] == 1] == ["started"]
        stopped = execute(root, kafka, plan_id, "--stop")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            kill(process)
    output = (tmp_path / "run.log").read_text()
    assert code == 1 and "stopped" in output, output
    assert set(assignment(kafka, topic)[0][0]) == {1, 2}
    assert kafka.throttles([topic]) == {}
    outcomes = [r["outcome"] for r in executions(root, plan_id) if r["batch"] == 1]
    assert outcomes[0] == "started" and "stopped" in outcomes[1:], outcomes
    assert completed(executions(root, plan_id)) == [0]


def test_a_plan_superseded_mid_run_stops_before_its_next_batch(kafka, tmp_path):
    """Runs on real Kafka: while batch 1 runs, the job records the plan superseded; the executor finishes
    batch 1 (cleanly, throttles removed) and does not start batch 2."""
    topic, actions = skewed(kafka)
    root = tmp_path / "lh"
    plan_id = write_plan(root, actions, deadline_seconds=DEADLINE)
    process = start_execute(root, kafka, plan_id, tmp_path / "run.log")
    try:
        wait_for(
            lambda: any(r["batch"] == 1 and r["outcome"] == "started" for r in executions(root, plan_id)),
            120,
            "batch 1 to start",
        )
        supersede(root, plan_id)
        code = process.wait(timeout=180)
    finally:
        if process.poll() is None:
            kill(process)
    output = (tmp_path / "run.log").read_text()
    assert code == 1 and "superseded" in output and "before batch 2" in output, output
    assert completed(executions(root, plan_id)) == [0, 1]
    assert not [r for r in executions(root, plan_id) if r["batch"] == 2]
    assert set(assignment(kafka, topic)[1][0]) == {1, 3}
    assert kafka.throttles([topic]) == {}


def test_dry_run_prints_each_batch_and_changes_nothing(kafka, tmp_path):
    """Runs on real Kafka: --dry-run lists each batch with its throttles, throttled replicas and moves, and
    leaves the cluster and the record as they were."""
    topic, actions = skewed(kafka)
    root = tmp_path / "lh"
    plan_id = write_plan(root, actions, deadline_seconds=DEADLINE)
    before = assignment(kafka, topic)
    ran = execute(root, kafka, plan_id, "--dry-run")
    assert ran.returncode == 0, ran.stderr
    assert f"reassign {topic}-0: [1, 2] -> [3, 2]" in ran.stdout, ran.stdout
    assert (
        "leader.replication.throttled.replicas=0:1,0:2 follower.replication.throttled.replicas=0:3"
        in ran.stdout
    )
    assert f"preferred election: {topic}-2" in ran.stdout
    assert assignment(kafka, topic) == before
    assert kafka.throttles([topic]) == {}
    assert executions(root, plan_id) == []


def test_throttles_an_operator_set_before_the_batch_stay_and_only_its_own_are_removed(kafka, tmp_path):
    """Runs on real Kafka, Cruise Control's rule: broker 3 already has an operator's rate, and the topic's
    lists already hold an operator's entries (one of them, 0:1, one the batch would add too). The batch
    sets no rate on broker 3 (it keeps the operator's), adds only the entries that were missing, records
    only what it set, and afterwards exactly the operator's throttles are left."""
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient

    topic = create_topic(kafka, {0: [1, 2], 1: [2, 3]})
    fill(kafka, topic, {0: 2 * MB, 1: 1 * MB})
    sizes = log_sizes(kafka, topic)
    actions = [Action("replica_move", topic, 0, (1, 2), (3, 2), 1, 3, sizes[(0, 1)])]
    root = tmp_path / "lh"
    plan_id = write_plan(root, actions, deadline_seconds=DEADLINE)
    operator = {
        "broker 3": {"follower.replication.throttled.rate": "50000000"},
        f"topic {topic}": {
            "leader.replication.throttled.replicas": "0:1",
            "follower.replication.throttled.replicas": "1:3",
        },
    }
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers.split(","))
    try:
        admin.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.BROKER if name.startswith("broker") else ConfigResourceType.TOPIC,
                    name.split(" ", 1)[1],
                    configs={k: (AlterConfigOp.SET, v) for k, v in configs.items()},
                )
                for name, configs in operator.items()
            ],
            raise_on_unknown=False,
            incremental=True,
        )
        wait_for(lambda: kafka.throttles([topic]) == operator, 30, "the operator's throttles")
        ran = execute(root, kafka, plan_id)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "broker 3 keeps the rate set before (50.0 MB/s)" in ran.stdout, ran.stdout
        assert set(assignment(kafka, topic)[0][0]) == {3, 2}
        assert kafka.throttles([topic]) == operator
        started = next(r for r in executions(root, plan_id) if r["outcome"] == "started")
        assert json.loads(started["throttle"]).keys() == {"1"}
        assert json.loads(started["throttled_replicas"]) == {topic: {"leader": ["0:2"], "follower": ["0:3"]}}
    finally:
        admin.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.BROKER if name.startswith("broker") else ConfigResourceType.TOPIC,
                    name.split(" ", 1)[1],
                    configs={k: (AlterConfigOp.DELETE, None) for k in configs},
                )
                for name, configs in operator.items()
            ],
            raise_on_unknown=False,
            incremental=True,
        )
        admin.close()
