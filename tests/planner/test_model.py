"""Snapshot validation at the edge and the load model."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from balancer.planner import SnapshotError, broker_loads, plan

BASE = {
    "cluster": "c",
    "brokers": [
        {"id": 1, "rack": "a", "capacity": {"network_in": 100, "network_out": 200, "disk": 1000}},
        {"id": 2, "rack": "b", "capacity": {"network_in": 100, "network_out": 200, "disk": 1000}},
        {"id": 3, "capacity": {"network_in": 100, "network_out": 200, "disk": 1000}},
    ],
    "partitions": [
        {
            "topic": "t",
            "partition": 0,
            "replicas": [1, 2, 3],
            "leader": 2,
            "bytes_in": 10,
            "bytes_out": 30,
            "size": 500,
        },
        {
            "topic": "t",
            "partition": 1,
            "replicas": [3],
            "leader": 3,
            "bytes_in": 5,
            "bytes_out": 0,
            "size": 7,
        },
    ],
}


def test_load_model_is_cruise_controls():
    loads = broker_loads(BASE)
    assert loads[1] == {"network_in": 10, "network_out": 0, "disk": 500, "replicas": 1, "leaders": 0}
    # Leader of an RF-3 partition: consumers' 30 plus 10 x 2 to followers.
    assert loads[2] == {"network_in": 10, "network_out": 50, "disk": 500, "replicas": 1, "leaders": 1}
    assert loads[3] == {"network_in": 15, "network_out": 0, "disk": 507, "replicas": 2, "leaders": 1}


def _broken(path, value):
    snap = copy.deepcopy(BASE)
    node = snap
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return snap


# Each broken snapshot and the message it must be rejected with (dict and columnar alike).
BAD_SNAPSHOTS = [
    (("partitions", 0, "replicas"), [1, 2, 9], r"unknown broker\(s\) \[9\]"),
    (("partitions", 0, "leader"), 9, "leader 9 is not among replicas"),
    (("partitions", 0, "replicas"), [1, 1, 2], "duplicate replica"),
    (("partitions", 0, "bytes_in"), -1, r"partitions\[0\] \(t-0\).bytes_in must be >= 0"),
    (("partitions", 1, "partition"), 0, "listed twice"),
    (("partitions", 0, "size"), float("nan"), "size must be a finite number"),
    (
        ("brokers", 0, "capacity"),
        {"network_in": 0, "network_out": 1, "disk": 1},
        r"capacity.network_in must be > 0",
    ),
    (("brokers", 1, "id"), 1, r"duplicate broker id"),
    (("partitions", 0, "replicas"), [], "non-empty list"),
]


@pytest.mark.parametrize("path, value, message", BAD_SNAPSHOTS)
def test_bad_snapshots_are_rejected_with_a_clear_message(path, value, message):
    with pytest.raises(SnapshotError, match=message):
        plan(_broken(path, value))


def test_missing_sections_are_named():
    with pytest.raises(SnapshotError, match=r"snapshot\.brokers"):
        plan({"partitions": []})
    from balancer.planner import PlannerOptions

    plan(BASE, PlannerOptions(excluded_brokers=(42,)))  # not in this snapshot: nothing to exclude


def test_empty_cluster_plans_nothing():
    snap = copy.deepcopy(BASE)
    snap["partitions"] = []
    result = plan(snap)
    assert result.actions == () and result.before["network_in"] == 1.0


def test_lower_bound_counts_the_biggest_partition_and_the_plan_reaches_it():
    from balancer.demo.scenarios import ScenarioSpec, generate

    snap = generate(ScenarioSpec(brokers=8, racks=0, topics=30, replication_factor=2, skew=0.0, seed=3))
    giant = snap["partitions"][0]
    # Half the other partitions' traffic: on its own 1.33x the average broker's network_in.
    giant["bytes_in"] = 0.5 * sum(p["bytes_in"] for p in snap["partitions"])
    from balancer.planner import PlannerOptions

    result = plan(snap, PlannerOptions(capacity_threshold=1.0))
    assert result.lower_bound["network_in"] == pytest.approx(4 / 3, rel=0.01)
    assert result.after["network_in"] <= result.lower_bound["network_in"] * 1.02
    assert result.after["network_in"] >= result.lower_bound["network_in"] - 1e-9


def test_brokers_without_rack_are_racks_of_their_own():
    from balancer.planner.validate import check_plan

    snap = copy.deepcopy(BASE)
    snap["brokers"].append({"id": 4, "capacity": {"network_in": 100, "network_out": 200, "disk": 1000}})
    snap["partitions"][1]["bytes_in"] = 60
    result = plan(snap)
    assert check_plan(snap, result) == []


def _columnar(snap):
    """The dict snapshot as a ColumnarSnapshot (how the streaming job hands windows to the planner)."""
    from balancer.planner.model import RESOURCES, ColumnarSnapshot

    parts = snap["partitions"]
    return ColumnarSnapshot(
        cluster=snap["cluster"],
        broker_ids=[b["id"] for b in snap["brokers"]],
        racks=[b.get("rack") for b in snap["brokers"]],
        capacity=[[b["capacity"][r] for r in RESOURCES] for b in snap["brokers"]],
        topics=[p["topic"] for p in parts],
        partition_ids=[p["partition"] for p in parts],
        replica_counts=[len(p["replicas"]) for p in parts],
        replicas_flat=np.array([b for p in parts for b in p["replicas"]], dtype=np.int64),
        leader=[p["leader"] for p in parts],
        bytes_in=[p["bytes_in"] for p in parts],
        bytes_out=[p["bytes_out"] for p in parts],
        size=[p["size"] for p in parts],
    )


def test_columnar_snapshot_loads_the_same_model():
    from balancer.planner import ClusterModel

    a, b = ClusterModel(BASE), ClusterModel(_columnar(BASE))
    for key in (
        "broker_ids",
        "rack",
        "cap",
        "partition_ids",
        "replicas",
        "leader",
        "rf",
        "bytes_in",
        "bytes_out",
        "size",
        "load",
    ):
        x, y = getattr(a, key), getattr(b, key)
        assert x.dtype == y.dtype and np.array_equal(x, y), key
    assert a.topics == b.topics and a.index == b.index and a.rack_names == b.rack_names
    assert broker_loads(_columnar(BASE)) == broker_loads(BASE)


@pytest.mark.parametrize("path, value, message", BAD_SNAPSHOTS)
def test_a_bad_columnar_snapshot_gets_the_dict_snapshots_message(path, value, message):
    snap = _broken(path, value)
    # Columns hold rates and capacities as floats: the same message as a dict with floats there.
    for p in snap["partitions"]:
        p.update({k: float(p[k]) for k in ("bytes_in", "bytes_out", "size")})
    for b in snap["brokers"]:
        b["capacity"] = {k: float(v) for k, v in b["capacity"].items()}
    with pytest.raises(SnapshotError) as expected:
        plan(snap)
    with pytest.raises(SnapshotError, match=message) as got:
        plan(_columnar(snap))
    assert str(got.value) == str(expected.value)


def test_lower_bound_counts_the_share_a_full_rack_leaves_the_others_and_the_plan_reaches_it():
    """Six brokers in five racks, RF 4: rack 0's two brokers hold at most one replica of each
    partition, a quarter of all traffic, so they average at most 0.75 of the cluster's network_in
    and the four other racks must average 1.125. The goals aim at that level, not at the threshold
    no placement reaches."""
    from balancer.demo.scenarios import ScenarioSpec, generate
    from balancer.planner import PlannerOptions
    from balancer.planner.validate import check_plan

    snap = generate(ScenarioSpec(brokers=6, racks=5, topics=60, replication_factor=4, skew=0.6, seed=11))
    result = plan(snap, PlannerOptions())
    assert result.lower_bound["network_in"] == pytest.approx(1.125, rel=1e-6)
    assert result.lower_bound["disk"] == pytest.approx(1.125, rel=1e-6)
    assert result.lower_bound["network_in"] - 1e-9 <= result.after["network_in"] <= 1.02 * 1.125
    assert check_plan(snap, result) == []
