"""End-to-end planner properties on generated scenarios (real code, no mocks)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.planner import PlannerOptions, broker_loads, plan
from balancer.planner.validate import check_plan


@st.composite
def specs(draw):
    brokers = draw(st.integers(2, 9))
    rf = draw(st.integers(1, min(3, brokers)))
    racks = draw(st.sampled_from([0, 2, 3]))
    racks = racks if racks <= brokers else 0
    lo = draw(st.integers(1, 8))
    return ScenarioSpec(
        brokers=brokers,
        racks=racks,
        topics=draw(st.integers(1, 8)),
        partitions_per_topic=(lo, lo + draw(st.integers(0, 8))),
        replication_factor=rf,
        skew=draw(st.sampled_from([0.0, 0.8, 1.2, 2.0])),
        new_empty_brokers=draw(st.integers(0, 2)),
        restarted_broker=draw(st.one_of(st.none(), st.integers(0, brokers - 1))),
        heterogeneous_capacity=draw(st.booleans()),
        seed=draw(st.integers(0, 10_000)),
    )


@st.composite
def option_sets(draw):
    return PlannerOptions(
        balance_threshold=draw(st.sampled_from([1.05, 1.10, 1.3])),
        capacity_threshold=draw(st.sampled_from([0.5, 0.8, 1.0])),
        max_bytes_to_move=draw(st.one_of(st.none(), st.integers(1, 10**14))),
        max_moves_per_broker=draw(st.one_of(st.none(), st.integers(1, 10))),
        excluded_topics=draw(st.sampled_from([None, "topic-000[0-2]"])),
        excluded_brokers=draw(st.sampled_from([(), (0,)])),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs(), option_sets())
# Three brokers each leading one of three partitions and an empty bigger one: network_in's ejection
# chain moved two leaders' replicas to the new broker, carrying network_out past its guard (2.0).
@example(
    ScenarioSpec(
        brokers=3,
        racks=0,
        topics=1,
        partitions_per_topic=(1, 3),
        replication_factor=2,
        skew=0.0,
        new_empty_brokers=1,
        heterogeneous_capacity=True,
        seed=8564,
    ),
    PlannerOptions(balance_threshold=1.05),
)
def test_every_plan_is_valid(spec, options):
    snapshot = generate(spec)
    frozen = copy.deepcopy(snapshot)
    result = plan(snapshot, options)
    assert snapshot == frozen, "plan() must not mutate its input"
    assert check_plan(snapshot, result) == []
    # Options are honoured.
    if options.max_bytes_to_move is not None:
        assert result.bytes_to_move <= options.max_bytes_to_move
    moved_topics = {a.topic for a in result.actions}
    if options.excluded_topics:
        assert not any(t.startswith("topic-000") and t[-1] in "012" for t in moved_topics)
    for a in result.actions:
        for b in options.excluded_brokers:
            assert not (b in a.new_replicas and b not in a.old_replicas)
            assert not (a.new_leader == b and a.old_leader != b)
    if options.max_moves_per_broker is not None:
        counts: dict[int, int] = {}
        for a in result.actions:
            for b in set(a.old_replicas) ^ set(a.new_replicas):
                counts[b] = counts.get(b, 0) + 1
        assert max(counts.values(), default=0) <= options.max_moves_per_broker
    # Ordering: leadership transfers first; counts agree with the actions.
    kinds = [a.kind == "leadership" for a in result.actions]
    assert kinds == sorted(kinds, reverse=True)
    assert result.leader_moves == sum(kinds)
    assert result.bytes_to_move == sum(a.bytes_to_move for a in result.actions)
    # Soft goals never make the traffic balance worse than the lower bound allows.
    for r in ("network_in", "network_out"):
        assert result.after[r] >= result.lower_bound[r] - 1e-9
    # Unless a hard goal (capacity) had to move something, the traffic figure never gets worse.
    if not any(g.hard and g.moves for g in result.goals):
        assert result.imbalance_after <= max(result.imbalance_before, options.balance_threshold) + 1e-9


def test_plan_is_deterministic():
    snapshot = generate(ScenarioSpec(brokers=8, topics=30, new_empty_brokers=2, skew=1.2, seed=3))
    assert plan(snapshot) == plan(copy.deepcopy(snapshot))


def test_restarted_broker_is_fixed_by_leadership_alone():
    snapshot = generate(ScenarioSpec(brokers=6, racks=3, topics=30, skew=0.0, restarted_broker=2, seed=11))
    loads = broker_loads(snapshot)
    assert loads[2]["leaders"] == 0
    result = plan(snapshot)
    assert result.imbalance_before > 1.3
    assert result.replica_moves == 0 and result.bytes_to_move == 0
    assert result.leader_moves > 0
    assert all(a.kind == "leadership" for a in result.actions)
    assert result.after["network_out"] <= 1.10
    # Handing leadership back to the preferred replica needs no reassignment, only an election.
    assert result.to_reassignment()["partitions"] == []
    assert len(result.to_election()["partitions"]) == result.leader_moves
    assert check_plan(snapshot, result) == []


def test_scale_out_fills_new_brokers_and_balances_traffic():
    snapshot = generate(ScenarioSpec(brokers=6, racks=3, topics=30, new_empty_brokers=3, seed=5))
    result = plan(snapshot)
    assert result.imbalance_before > 1.4
    assert result.after["network_in"] <= 1.10 + 1e-9 and result.after["network_out"] <= 1.10 + 1e-9
    new = {6, 7, 8}
    assert all(any(b in a.new_replicas for a in result.actions) for b in new)
    assert check_plan(snapshot, result) == []


def test_balanced_cluster_needs_nothing():
    snapshot = generate(ScenarioSpec(brokers=6, racks=3, topics=20, skew=0.0, seed=1))
    result = plan(snapshot, PlannerOptions(balance_threshold=1.5))
    assert result.actions == ()
    assert result.to_reassignment() == {"version": 1, "partitions": []}


def test_max_bytes_cap_limits_the_plan():
    snapshot = generate(ScenarioSpec(brokers=6, racks=3, topics=30, new_empty_brokers=3, seed=5))
    free = plan(snapshot)
    capped = plan(snapshot, PlannerOptions(max_bytes_to_move=free.bytes_to_move // 10))
    assert 0 < capped.bytes_to_move <= free.bytes_to_move // 10
    assert capped.imbalance_after < capped.imbalance_before


def test_options_are_type_checked():
    with pytest.raises(TypeError):
        plan(generate(ScenarioSpec()), {"balance_threshold": 1.1})


def test_generated_columns_plan_as_the_generated_dicts():
    """``generate_columnar`` is ``generate`` without a dict per partition: same cluster, same plan."""
    from balancer.demo.scenarios import generate_columnar

    spec = ScenarioSpec(
        brokers=9, racks=3, topics=80, partitions_per_topic=(4, 24), restarted_broker=2, seed=5
    )
    as_dicts, as_columns = generate(spec), generate_columnar(spec)
    for p, q in zip(as_dicts["partitions"], as_columns.to_dict()["partitions"], strict=True):
        assert p == {**q, "size": int(q["size"])}
    assert as_dicts["brokers"] == as_columns.to_dict()["brokers"]
    assert plan(as_dicts).actions == plan(as_columns).actions
