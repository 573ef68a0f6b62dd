"""Drain (decommission): every replica and leadership leaves the drained brokers, hard goals kept,
and the drain alone copies no more data than the least any valid assignment must."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.planner import (
    DistinctBrokersGoal,
    DrainGoal,
    PlannerOptions,
    RackAwareGoal,
    ReplicationFactorGoal,
    plan,
)
from balancer.planner.validate import check_plan


def _left_on(snapshot, result, drained):
    final = {(p["topic"], p["partition"]): (p["replicas"], p["leader"]) for p in snapshot["partitions"]}
    for a in result.actions:
        final[(a.topic, a.partition)] = (list(a.new_replicas), a.new_leader)
    return [k for k, (reps, lead) in final.items() if set(reps) & set(drained) or lead in drained]


@st.composite
def drain_cases(draw):
    brokers = draw(st.integers(3, 9))
    rf = draw(st.integers(1, min(3, brokers - 1)))
    racks = draw(st.sampled_from([0, 2, 3]))
    racks = racks if racks <= brokers else 0
    spec = ScenarioSpec(
        brokers=brokers,
        racks=racks,
        topics=draw(st.integers(1, 6)),
        partitions_per_topic=(1, 8),
        replication_factor=rf,
        skew=draw(st.sampled_from([0.0, 1.2])),
        new_empty_brokers=draw(st.integers(0, 2)),
        seed=draw(st.integers(0, 10_000)),
    )
    live_needed = rf
    n_all = brokers + spec.new_empty_brokers
    k = draw(st.integers(1, max(1, min(2, n_all - live_needed))))
    drained = tuple(draw(st.lists(st.integers(0, brokers - 1), min_size=k, max_size=k, unique=True)))
    return spec, drained


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drain_cases())
def test_drain_leaves_nothing_and_keeps_every_hard_goal(case):
    spec, drained = case
    snapshot = generate(spec)
    result = plan(snapshot, PlannerOptions(drain_brokers=drained, capacity_threshold=1.0))
    assert check_plan(snapshot, result) == []  # RF, distinct, racks (as far as racks remain), drained empty
    assert _left_on(snapshot, result, drained) == []
    assert "drain" not in result.unmet_goals, result.unsatisfied


HARD = lambda: [ReplicationFactorGoal(), DistinctBrokersGoal(), RackAwareGoal(), DrainGoal()]  # noqa: E731


def _brute_force_least_bytes(snapshot, drained) -> int:
    """Per partition (the hard goals constrain each partition alone): the cheapest replica set on
    brokers that stay, distinct, spanning at least min(racks before, RF, racks left) racks."""
    racks = {b["id"]: b.get("rack") for b in snapshot["brokers"]}
    live = [b for b in racks if b not in drained]
    rack_of = {b: racks[b] if racks[b] is not None else f"__{b}" for b in racks}
    n_live_racks = len({rack_of[b] for b in live})
    aware = any(r is not None for r in racks.values())
    total = 0
    for p in snapshot["partitions"]:
        old = set(p["replicas"])
        need = min(len({rack_of[b] for b in old}), len(old), n_live_racks) if aware else 0
        best = min(
            len(set(new) - old) * p["size"]
            for new in itertools.combinations(live, len(old))
            if len({rack_of[b] for b in new}) >= need
        )
        total += best
    return total


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(4, 7), st.sampled_from([0, 2, 3]), st.integers(1, 3), st.integers(0, 5000), st.data())
def test_drain_moves_the_least_data_a_brute_force_finds(brokers, racks, rf, seed, data):
    spec = ScenarioSpec(
        brokers=brokers, racks=racks, topics=2, partitions_per_topic=(1, 4), replication_factor=rf, seed=seed
    )
    snapshot = generate(spec)
    drained = tuple(
        data.draw(st.lists(st.integers(0, brokers - 1), min_size=1, max_size=brokers - rf, unique=True))
    )
    result = plan(snapshot, PlannerOptions(drain_brokers=drained), goals=HARD())
    assert check_plan(snapshot, result) == []
    assert _left_on(snapshot, result, drained) == []
    assert result.bytes_to_move == _brute_force_least_bytes(snapshot, drained)


def _snapshot(partitions, brokers):
    return {
        "cluster": "t",
        "brokers": [
            {"id": b, "rack": r, "capacity": {"network_in": 1e9, "network_out": 1e9, "disk": 1e12}}
            for b, r in brokers
        ],
        "partitions": [
            {
                "topic": "t",
                "partition": i,
                "replicas": reps,
                "leader": reps[0],
                "bytes_in": 1e6,
                "bytes_out": 1e6,
                "size": 1e9,
            }
            for i, reps in enumerate(partitions)
        ],
    }


def test_only_rack_diverse_copy_goes_to_a_rack_the_partition_lacks():
    # Broker 2 holds the partition's only copy in rack b; broker 3 (rack b) and 4 (rack a) stay.
    snap = _snapshot([[0, 2]], [(0, "a"), (1, "a"), (2, "b"), (3, "b"), (4, "a")])
    result = plan(snap, PlannerOptions(drain_brokers=(2,)))
    assert check_plan(snap, result) == []
    (action,) = result.actions
    assert set(action.new_replicas) == {0, 3}


def test_a_whole_rack_drained_is_valid_and_says_why_racks_shrink():
    snap = _snapshot([[0, 2], [1, 3]], [(0, "a"), (1, "a"), (2, "b"), (3, "b"), (4, "c")])
    result = plan(snap, PlannerOptions(drain_brokers=(2, 3, 4)))
    assert check_plan(snap, result) == []
    assert _left_on(snap, result, (2, 3, 4)) == []
    assert any("rack" in n for n in result.notes)


def test_leadership_leaves_a_drained_broker_even_without_data_to_move_first():
    snap = _snapshot([[2, 0], [2, 1]], [(0, None), (1, None), (2, None), (3, None)])
    result = plan(snap, PlannerOptions(drain_brokers=(2,)))
    assert check_plan(snap, result) == [] and _left_on(snap, result, (2,)) == []
    assert all(a.new_leader != 2 for a in result.actions)


def test_scale_out_and_drain_in_one_plan():
    spec = ScenarioSpec(brokers=6, racks=3, topics=20, new_empty_brokers=3, seed=5)
    snapshot = generate(spec)
    result = plan(snapshot, PlannerOptions(drain_brokers=(0, 1)))
    assert check_plan(snapshot, result) == [] and not result.unsatisfied
    received = {b for a in result.actions for b in set(a.new_replicas) - set(a.old_replicas)}
    assert {6, 7, 8} <= received


def test_what_cannot_leave_is_named():
    snap = _snapshot([[0, 1]], [(0, None), (1, None), (2, None)])
    result = plan(snap, PlannerOptions(drain_brokers=(0,), excluded_topics="t"))
    assert any("excluded topic" in n for n in result.notes)
    assert any("replicas left on drained" in m for m in check_plan(snap, result))


def test_checker_flags_a_replica_left_on_a_drained_broker():
    import dataclasses

    snap = _snapshot([[0, 1], [1, 2]], [(0, None), (1, None), (2, None), (3, None)])
    result = plan(snap, PlannerOptions(drain_brokers=(1,)))
    assert check_plan(snap, result) == []
    broken = dataclasses.replace(result, actions=result.actions[:1])
    assert any("drained broker(s) [1]" in m for m in check_plan(snap, broken))


@pytest.mark.parametrize("value", [["7"], None, "7,8", [True]])
def test_bad_drain_value_names_the_argument(value):
    with pytest.raises(ValueError, match=r"PlannerOptions\.drain_brokers"):
        PlannerOptions(drain_brokers=value)
