"""Plan assembly: moves coalesced per partition, Kafka's JSON files, the summary."""

from __future__ import annotations

from balancer.planner import ClusterModel, Move, plan
from balancer.planner.result import build_actions

CAP = {"network_in": 100.0, "network_out": 100.0, "disk": 1000.0}
SNAP = {
    "cluster": "c",
    "brokers": [{"id": i, "capacity": dict(CAP)} for i in (10, 20, 30, 40)],
    "partitions": [
        {
            "topic": "t",
            "partition": 0,
            "replicas": [10, 20],
            "leader": 20,
            "bytes_in": 1,
            "bytes_out": 1,
            "size": 5,
        },
        {
            "topic": "t",
            "partition": 1,
            "replicas": [30, 40],
            "leader": 30,
            "bytes_in": 1,
            "bytes_out": 1,
            "size": 7,
        },
    ],
}


def test_move_and_move_back_cancel_out():
    model = ClusterModel(SNAP)
    model.apply(Move("replica_move", 1, 2, 0))  # broker 30 -> 10 (indices are sorted ids)
    model.apply(Move("replica_move", 1, 0, 2))
    assert build_actions(model) == ()


def test_moves_of_one_partition_coalesce_into_one_action():
    model = ClusterModel(SNAP)
    model.apply(Move("replica_move", 1, 2, 0))  # 30 -> 10, leader follows: 10 leads
    model.apply(Move("replica_move", 1, 0, 1))  # 10 -> 20
    (action,) = build_actions(model)
    assert action.kind == "replica_move"
    assert action.old_replicas == (30, 40) and action.new_replicas == (20, 40)
    assert action.old_leader == 30 and action.new_leader == 20 and action.bytes_to_move == 7


def test_leadership_order_and_json_files():
    model = ClusterModel(SNAP)
    model.apply(Move("replica_move", 1, 3, 0))  # 40 -> 10: a data move
    model.apply(Move("leadership", 0, 1, 0))  # back to the preferred replica 10: election only
    actions = build_actions(model)
    assert [a.kind for a in actions] == ["leadership", "replica_move"]
    assert actions[0].new_replicas == actions[0].old_replicas == (10, 20)


def test_plan_files_and_summary():
    snap = {
        **SNAP,
        "partitions": SNAP["partitions"]
        + [
            {
                "topic": "u",
                "partition": p,
                "replicas": [10, 30],
                "leader": 10,
                "bytes_in": 20,
                "bytes_out": 20,
                "size": 100,
            }
            for p in range(4)
        ],
    }
    result = plan(snap)
    reassignment = result.to_reassignment()
    assert reassignment["version"] == 1 and reassignment["partitions"]
    for entry in reassignment["partitions"]:
        assert entry["log_dirs"] == ["any"] * len(entry["replicas"])
    changed = {(a.topic, a.partition) for a in result.actions if a.new_leader != a.old_leader}
    assert {(e["topic"], e["partition"]) for e in result.to_election()["partitions"]} == changed
    text = result.summary()
    for word in ("network_in", "network_out", "disk", "leadership transfers", "replica moves", "data moved"):
        assert word in text
