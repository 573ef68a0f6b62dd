from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

from balancer.planner import Action


def make(**over):
    base = dict(
        kind="replica_move",
        topic="t",
        partition=0,
        old_replicas=(1, 2),
        new_replicas=(1, 3),
        old_leader=1,
        new_leader=1,
        bytes_to_move=10,
    )
    base.update(over)
    return Action(**base)


def test_valid_actions():
    assert make().moved_replicas == 1
    assert make(kind="leadership", new_replicas=(2, 1), new_leader=2, bytes_to_move=0).moved_replicas == 0


@pytest.mark.parametrize(
    "over, message",
    [
        ({"kind": "teleport"}, "kind must be one of"),
        ({"new_replicas": (1, 3, 4)}, "replication factor changed"),
        ({"new_replicas": (1, 1)}, "duplicate broker"),
        ({"old_leader": 5}, "old_leader 5 not in old_replicas"),
        ({"new_replicas": (3, 1)}, r"new_replicas\[0\] must be the intended leader"),
        ({"kind": "leadership", "new_replicas": (2, 1), "new_leader": 2}, "moves no data"),
        ({"kind": "leadership", "bytes_to_move": 0}, "keeps the replica set"),
        ({"new_replicas": (1, 2), "bytes_to_move": 0}, "changes the replica set"),
        ({"partition": -1}, "partition must be an int"),
        ({"old_replicas": [1, 2]}, "must be a non-empty tuple"),
    ],
)
def test_invalid_actions_are_rejected(over, message):
    with pytest.raises(ValueError, match=message):
        make(**over)


def test_frozen():
    with pytest.raises(FrozenInstanceError):
        make().kind = "swap"  # type: ignore[misc]
