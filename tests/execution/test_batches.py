from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.execution import Batch, participants, split_batches
from balancer.planner import Action

BROKERS = list(range(1, 9))


def move(partition, old, new, *, topic="t", kind="replica_move", size=100, new_leader=None):
    old, new = tuple(old), tuple(new)
    leader = new[0] if new_leader is None else new_leader
    new = (leader,) + tuple(b for b in new if b != leader)
    moved = len(set(new) - set(old))
    return Action(
        kind=kind,
        topic=topic,
        partition=partition,
        old_replicas=old,
        new_replicas=new,
        old_leader=old[0],
        new_leader=leader,
        bytes_to_move=size * moved,
    )


def leadership(partition, old, new_leader, *, topic="t"):
    new = (new_leader,) + tuple(b for b in old if b != new_leader)
    return Action(
        kind="leadership",
        topic=topic,
        partition=partition,
        old_replicas=tuple(old),
        new_replicas=new,
        old_leader=old[0],
        new_leader=new_leader,
        bytes_to_move=0,
    )


@st.composite
def actions(draw):
    count = draw(st.integers(0, 60))
    out = []
    for p in range(count):
        rf = draw(st.integers(1, 3))
        old = draw(st.permutations(BROKERS))[:rf]
        kind = draw(st.sampled_from(["leadership", "replica_move", "swap"]))
        if kind == "leadership" and rf > 1:
            out.append(leadership(p, old, draw(st.sampled_from(old[1:]))))
            continue
        others = [b for b in BROKERS if b not in old]
        n_moved = draw(st.integers(1, rf))
        gone = draw(st.permutations(old))[:n_moved]
        new = [b for b in old if b not in gone] + draw(st.permutations(others))[:n_moved]
        leader = draw(st.sampled_from(new))
        out.append(
            move(
                p,
                old,
                new,
                kind="swap" if kind == "swap" else "replica_move",
                size=draw(st.integers(0, 10**9)),
                new_leader=leader,
            )
        )
    return out


def fits(batch_actions, per_broker, per_batch):
    counts = {}
    for a in batch_actions:
        for b in participants(a):
            counts[b] = counts.get(b, 0) + 1
    return len(batch_actions) <= per_batch and all(c <= per_broker for c in counts.values())


@settings(max_examples=300, deadline=None)
@given(actions(), st.integers(1, 7), st.integers(1, 4), st.integers(1, 12))
def test_batches_respect_limits_and_keep_every_action_once(plan, lead_max, per_broker, per_batch):
    batches = split_batches(
        plan,
        max_leadership_moves=lead_max,
        max_partition_moves_per_broker=per_broker,
        max_partition_moves=per_batch,
    )
    # Every action in exactly one batch.
    placed = [a for b in batches for a in b.actions]
    assert sorted(map(id, placed)) == sorted(map(id, plan))
    assert [b.index for b in batches] == list(range(len(batches)))
    # Leadership first, and only leadership in leadership batches.
    kinds = [b.kind for b in batches]
    assert kinds == sorted(kinds, key=lambda k: k != "leadership")
    for b in batches:
        assert b.actions, "no empty batch"
        assert all((a.kind == "leadership") == (b.kind == "leadership") for a in b.actions)
        if b.kind == "leadership":
            assert len(b.actions) <= lead_max
        else:
            assert fits(b.actions, per_broker, per_batch)
    # Order: leadership batches are the plan's leadership transfers in order; within every batch,
    # plan order; a replica move sits in a later batch only because each earlier batch was full
    # for it when it was placed (first-fit over the actions listed before it).
    position = {id(a): i for i, a in enumerate(plan)}
    lead = [a for b in batches if b.kind == "leadership" for a in b.actions]
    assert lead == [a for a in plan if a.kind == "leadership"]
    for b in batches:
        seq = [position[id(a)] for a in b.actions]
        assert seq == sorted(seq)
    replica_batches = [b for b in batches if b.kind == "replica_move"]
    for k, b in enumerate(replica_batches):
        for a in b.actions:
            for earlier in replica_batches[:k]:
                before = [x for x in earlier.actions if position[id(x)] < position[id(a)]]
                assert not fits(before + [a], per_broker, per_batch)


def test_cruise_control_defaults_and_participants():
    a = move(0, (1, 2, 3), (1, 2, 4))  # leader 1 sends to 4; 3 only drops its replica
    assert participants(a) == {1, 4}
    b = move(1, (2, 3), (5, 6))  # leader 2 sends to 5 and 6
    assert participants(b) == {2, 5, 6}
    assert participants(leadership(2, (1, 2), 2)) == frozenset()
    # Six moves all sent by broker 1: five fit in a batch, the sixth waits.
    plan = [move(p, (1, 2), (1, 10 + p)) for p in range(6)]
    batches = split_batches(plan)
    assert [len(b.actions) for b in batches] == [5, 1]
    assert batches[0].bytes_to_move == 500 and batches[0].brokers == {1, 10, 11, 12, 13, 14}


def test_first_fit_fills_other_brokers_around_a_busy_one():
    busy = [move(p, (1, 2), (1, 10 + p)) for p in range(3)]  # broker 1 sends three
    other = move(9, (3, 4), (3, 5))
    batches = split_batches(busy + [other], max_partition_moves_per_broker=2)
    assert [[a.partition for a in b.actions] for b in batches] == [[0, 1, 9], [2]]


def test_cluster_limit_and_leadership_chunks():
    plan = [leadership(p, (1, 2), 2) for p in range(5)] + [
        move(10 + p, (p + 1,), (p + 20,)) for p in range(5)
    ]
    batches = split_batches(plan, max_leadership_moves=2, max_partition_moves=2)
    assert [(b.kind, len(b.actions)) for b in batches] == [
        ("leadership", 2),
        ("leadership", 2),
        ("leadership", 1),
        ("replica_move", 2),
        ("replica_move", 2),
        ("replica_move", 1),
    ]
    assert split_batches([]) == []
    assert isinstance(batches[0], Batch)


@pytest.mark.parametrize(
    "name", ["max_leadership_moves", "max_partition_moves_per_broker", "max_partition_moves"]
)
@pytest.mark.parametrize("value", [0, -1, 1.5, True, "5", None])
def test_limits_are_validated_naming_the_argument(name, value):
    with pytest.raises(ValueError, match=name):
        split_batches([], **{name: value})


def test_items_must_be_actions():
    with pytest.raises(TypeError, match=r"actions\[0\]"):
        split_batches([{"kind": "leadership"}])
