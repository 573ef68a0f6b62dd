"""The plan lifecycle end to end: simulated clusters report to the embedded broker, the job (real
Spark, Delta on disk) plans, the simulators carry plans out (or not, or elsewhere), and the job
tracks each plan from the telemetry alone.

Three clusters share one topic and one job, run three times (--once) between which the test plays
the operators: ``life-a`` executes its plan in two halves, ``life-b`` ignores its plan, ``life-c``
moves a partition of its plan somewhere else. TTL and min_plan_interval are 10 minutes (two windows).
"""

from __future__ import annotations

import json

import pytest
from support import MINUTE, T0, job_config, minutes_of, produce

from balancer.cli.sql import register_sql_views
from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.demo.simulator import SimulatedCluster
from balancer.spark import job
from balancer.spark.lakehouse import Lakehouse

pytestmark = pytest.mark.integration

WINDOW = 5 * MINUTE


def _cluster(name: str) -> SimulatedCluster:
    spec = ScenarioSpec(
        brokers=4,
        racks=0,
        topics=3,
        partitions_per_topic=(3, 4),
        replication_factor=2,
        total_bytes_in=30e6,
        new_empty_brokers=1,
        seed=5,
        cluster=name,
    )
    return SimulatedCluster(
        generate(spec), noise=0.0, throttle_bytes_per_sec=1e15
    )  # moves finish within a minute


def _apply(cluster: SimulatedCluster, actions: list[dict], minute: int) -> None:
    cluster.apply(
        {
            "version": 1,
            "partitions": [
                {"topic": a["topic"], "partition": a["partition"], "replicas": list(a["new_replicas"])}
                for a in actions
            ],
        },
        T0 + minute * MINUTE,
    )


def _minute(frame):
    """``frame`` with ``end``: its window's end, in minutes after T0."""
    return frame.selectExpr("*", f"(unix_millis(window_end) - {T0}) DIV {MINUTE} AS end")


def test_plans_are_tracked_from_telemetry_one_at_a_time(spark, broker, topic, tmp_path):
    a, b, c = _cluster("life-a"), _cluster("life-b"), _cluster("life-c")
    config = job_config(
        tmp_path,
        broker.bootstrap_servers,
        topic,
        "executor.proposal_ttl=10 minutes",
        "balancer.min_plan_interval=10 minutes",
    )
    lakehouse = Lakehouse(spark, config.lakehouse.path, engine="delta-rs")

    def run(first: int, last: int) -> None:
        produce(
            broker.bootstrap_servers, topic, [r for sim in (a, b, c) for r in minutes_of(sim, first, last)]
        )
        job.run_until_idle(spark, job.start(spark, config, once=True))

    def plans(cluster: str) -> list[dict]:
        rows = (
            _minute(lakehouse.read("balance_plans"))
            .where(f"cluster = '{cluster}'")
            .orderBy("window_end")
            .collect()
        )
        return [r.asDict() for r in rows]

    def actions(plan_id: str) -> list[dict]:
        return [
            r.asDict()
            for r in lakehouse.read("plan_actions").where(f"plan_id = '{plan_id}'").orderBy("seq").collect()
        ]

    def events(plan_id: str) -> list[tuple]:
        rows = (
            _minute(lakehouse.read("plan_events"))
            .where(f"plan_id = '{plan_id}'")
            .orderBy("window_end")
            .collect()
        )
        return [(r["end"], r["status"], r["actions_done"], r["actions_total"], r["bytes_done"]) for r in rows]

    # Run 1: windows [0,5) and [5,10) close in one micro-batch. The first proposes; the second,
    # planned together with it, waits on it (as if processed in window order).
    run(0, 11)
    for name in ("life-a", "life-b", "life-c"):
        rows = plans(name)
        assert [(r["end"], r["status"]) for r in rows] == [(5, "proposed"), (10, "waiting")], rows
        assert rows[0]["plan_id"] in rows[1]["reason"] and "is proposed" in rows[1]["reason"]
        assert rows[1]["imbalance_after"] is None and rows[1]["reassignment_json"] is None
    plan_a, plan_b, plan_c = (plans(n)[0] for n in ("life-a", "life-b", "life-c"))
    acts_a, acts_c = actions(plan_a["plan_id"]), actions(plan_c["plan_id"])
    assert len(acts_a) >= 2
    assert not [r for r in plans("life-a") if r["status"] == "waiting" and actions(r["plan_id"])]
    batches = (
        lakehouse.read("plan_batches").where(f"plan_id = '{plan_a['plan_id']}'").orderBy("batch").collect()
    )
    assert sum(r["actions"] for r in batches) == len(acts_a)
    assert sum(r["bytes_to_move"] for r in batches) == plan_a["bytes_to_move"]
    for r in batches:
        if r["kind"] == "replica_move" and r["bytes_to_move"]:
            assert json.loads(r["throttle"]) and r["estimated_seconds"] > 0 and r["reassignment_json"]

    # Operators: life-a carries out the first half of its plan; life-c moves a partition of its plan
    # to a broker the plan did not name; life-b does nothing.
    half = len(acts_a) // 2
    _apply(a, acts_a[:half], 12)
    moved = acts_c[0]
    outsider = next(
        x for x in sorted(c.brokers) if x not in set(moved["old_replicas"]) | set(moved["new_replicas"])
    )
    _apply(c, [{**moved, "new_replicas": [moved["old_replicas"][0], outsider]}], 12)
    run(12, 16)
    assert events(plan_a["plan_id"]) == [
        (15, "executing", half, len(acts_a), sum(x["bytes_to_move"] for x in acts_a[:half]))
    ]
    assert plans("life-a")[-1]["status"] == "waiting" and "is executing" in plans("life-a")[-1]["reason"]
    # life-b: the TTL passed with nothing observed; a new plan replaces the old one in that window.
    assert [e[1] for e in events(plan_b["plan_id"])] == ["superseded"]
    new_b = plans("life-b")[-1]
    assert (new_b["end"], new_b["status"]) == (15, "proposed") and new_b["plan_id"] != plan_b["plan_id"]
    # life-c: diverged, and the next plan waits min_plan_interval from the window that saw it.
    assert [e[1] for e in events(plan_c["plan_id"])] == ["diverged"]
    detail = lakehouse.read("plan_events").where(f"plan_id = '{plan_c['plan_id']}'").first()["detail"]
    assert f"{moved['topic']}-{moved['partition']} on" in detail
    assert plans("life-c")[-1]["status"] == "waiting" and "diverged" in plans("life-c")[-1]["reason"]

    # life-a finishes; windows [15,20) and [20,25) close in one micro-batch: completed in the first,
    # measured in the second (the first full window after completion).
    _apply(a, acts_a[half:], 17)
    run(17, 26)
    assert events(plan_a["plan_id"])[-1] == (
        20,
        "completed",
        len(acts_a),
        len(acts_a),
        plan_a["bytes_to_move"],
    )
    assert [(r["end"], r["status"]) for r in plans("life-a")] == [
        (5, "proposed"),
        (10, "waiting"),
        (15, "waiting"),
        (20, "waiting"),
        (25, "waiting"),
    ]
    assert (
        "completed" in plans("life-a")[-1]["reason"] and "min_plan_interval" in plans("life-a")[-1]["reason"]
    )
    assert [r["status"] for r in plans("life-b")][-2] == "waiting"  # [15,20) waits on life-b's second plan
    assert plans("life-c")[-1]["status"] != "waiting"  # 10 minutes after the divergence: planned again

    # Predicted vs realized: the realized figures are broker_load's of the window [20,25).
    outcomes = _minute(lakehouse.read("plan_outcomes")).where(f"plan_id = '{plan_a['plan_id']}'").collect()
    assert outcomes and {r["end"] for r in outcomes} == {25}
    loads = [
        r.asDict()
        for r in lakehouse.read("broker_load")
        .where(f"cluster = 'life-a' AND window_end = timestamp_millis({T0 + 25 * MINUTE})")
        .collect()
    ]
    assert len(loads) == len(a.brokers)
    for resource in ("network_in", "network_out", "disk"):
        average = sum(r[resource] for r in loads) / sum(r[f"capacity_{resource}"] for r in loads)
        expected = {r["broker"]: r[f"util_{resource}"] / average for r in loads}
        mine = {o["broker"]: o for o in outcomes if o["resource"] == resource}
        assert {b: o["realized"] for b, o in mine.items() if b is not None} == pytest.approx(
            expected, rel=1e-9
        )
        assert mine[None]["realized"] == pytest.approx(max(expected.values()), rel=1e-9)
        assert mine[None]["predicted"] == plan_a[f"{resource}_after"]
        assert mine[None]["before"] == plan_a[f"{resource}_before"]
        # No noise and no traffic change: the cluster ended where the plan said, broker by broker.
        for broker_id, o in mine.items():
            assert o["predicted"] == pytest.approx(o["realized"], rel=1e-6), (resource, broker_id)
            assert o["traffic_change"] == pytest.approx(0.0, abs=1e-9)

    # The view gives each plan's current status.
    lakehouse.register_views()
    register_sql_views(spark)
    status = {
        r["plan_id"]: r["status"] for r in spark.sql("SELECT plan_id, status FROM plan_status").collect()
    }
    assert status[plan_a["plan_id"]] == "completed"
    assert status[plan_b["plan_id"]] == "superseded"
    assert status[plan_c["plan_id"]] == "diverged"

    # The plan-lifecycle notebook, in a kernel: each plan's status as the view has it, the lifecycle, and
    # predicted vs realized charted for the completed plan's brokers.
    from notebook_runner import NOTEBOOKS, run_notebook

    notebook = run_notebook(
        NOTEBOOKS / "plan_lifecycle.ipynb",
        config.lakehouse.path,
        {
            "status": "status.set_index('plan_id').status.to_dict()",
            "lifecycle": "sorted(set(lifecycle.status))",
            "charted": "[row for data in predicted_vs_realized_chart.to_dict()['datasets'].values()"
            " for row in data if 'realized' in row]",
        },
    )
    assert notebook["status"] == status
    assert set(notebook["lifecycle"]) >= {"executing", "completed", "superseded", "diverged"}
    charted = notebook["charted"]
    assert {row["plan_id"] for row in charted} == {plan_a["plan_id"]}
    assert len(charted) == 3 * len(a.brokers)
