from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.execution import Batch, BrokerLoad, compute_throttle, plan_schedule, split_batches
from balancer.execution.throttle import FLOOR_CAPACITY_SHARE, MIN_RATE
from balancer.planner import Action

MB = 1e6
BIG = BrokerLoad(
    network_in=0.0, network_out=0.0, capacity_network_in=1000 * MB, capacity_network_out=1000 * MB
)


def leadership(topic):
    """Partition 0 of ``topic``: leadership from broker 1 to broker 2, no data."""
    return Action(
        kind="leadership",
        topic=topic,
        partition=0,
        old_replicas=(1, 2),
        new_replicas=(2, 1),
        old_leader=1,
        new_leader=2,
        bytes_to_move=0,
    )


def move(partition, old, new, size):
    moved = len(set(new) - set(old))
    return Action(
        kind="replica_move",
        topic="t",
        partition=partition,
        old_replicas=tuple(old),
        new_replicas=tuple(new),
        old_leader=old[0],
        new_leader=new[0],
        bytes_to_move=int(size * moved),
    )


def worked_batch():
    """Seed 002's example: broker 1 leads three partitions, each sends one 100 MB replica away."""
    plan = [move(p, (1, 5), (1, 2 + p), 100 * MB) for p in range(3)]
    (batch,) = split_batches(plan)
    return batch


def loads(**over):
    out = {b: BIG for b in range(1, 6)}
    out.update(over)
    return out


def test_worked_example_three_moves_of_100mb_in_200s_need_1_5_mb_per_s_on_the_sender():
    batch = worked_batch()
    t = compute_throttle(
        batch,
        seconds_left=200,
        broker_load=loads(),
        capacity_threshold=0.8,
        partition_traffic={("t", p): 0.0 for p in range(3)},
    )
    assert t.rate_by_broker[1] == pytest.approx(1.5 * MB)  # 300 MB / 200 s
    assert {b: t.rate_by_broker[b] for b in (2, 3, 4)} == pytest.approx(
        {2: 0.5 * MB, 3: 0.5 * MB, 4: 0.5 * MB}
    )
    assert 5 not in t.rate_by_broker  # it only drops its replica: no copying
    assert t.send_bytes == {1: 300 * MB}
    assert t.receive_bytes == {2: 100 * MB, 3: 100 * MB, 4: 100 * MB}
    assert t.estimated_seconds == pytest.approx(200)
    assert t.meets_deadline and t.note is None and t.batch == batch.index


def test_produce_traffic_of_throttled_partitions_is_added():
    t = compute_throttle(
        worked_batch(),
        seconds_left=200,
        broker_load=loads(),
        capacity_threshold=0.8,
        partition_traffic={("t", p): 0.1 * MB for p in range(3)},
    )
    # The sender's leader throttle meters every follower's fetch of a throttled partition: during the move
    # each partition has two (the old follower 5 and the new replica), so 3 x 2 x 0.1 MB/s on top.
    assert t.rate_by_broker[1] == pytest.approx(1.5 * MB + 3 * 2 * 0.1 * MB)
    # Each receiver's follower throttle meters its new replica only, which keeps up with producers.
    assert t.rate_by_broker[2] == pytest.approx(0.5 * MB + 0.1 * MB)
    assert t.estimated_seconds == pytest.approx(200) and t.meets_deadline


def test_the_senders_cap_counts_replication_already_in_its_load():
    # 1 MB/s spare on network_out; the old follower's 3 x 0.1 MB/s is already part of that load, so the
    # throttle may go to 1.3 MB/s: 0.6 MB/s metered produce leaves 0.7 MB/s for the 300 MB backlog.
    busy = BrokerLoad(
        network_in=0.0, network_out=7 * MB, capacity_network_in=10 * MB, capacity_network_out=10 * MB
    )
    t = compute_throttle(
        worked_batch(),
        seconds_left=200,
        broker_load=loads() | {1: busy},
        capacity_threshold=0.8,
        partition_traffic={("t", p): 0.1 * MB for p in range(3)},
    )
    assert t.rate_by_broker[1] == pytest.approx(1.3 * MB)
    assert t.estimated_seconds == pytest.approx(300 / 0.7)
    assert not t.meets_deadline


def test_deadline_not_reachable_within_spare_capacity_reports_the_duration_at_the_safe_throttle():
    # Broker 1: 10 MB/s out, 80% threshold = 8 MB/s, already 7.5 MB/s busy: 0.5 MB/s spare.
    tight = BrokerLoad(
        network_in=0.0, network_out=7.5 * MB, capacity_network_in=10 * MB, capacity_network_out=10 * MB
    )
    t = compute_throttle(
        worked_batch(),
        seconds_left=200,
        broker_load=loads() | {1: tight},
        capacity_threshold=0.8,
        partition_traffic={("t", p): 0.0 for p in range(3)},
    )
    assert t.rate_by_broker[1] == pytest.approx(0.5 * MB)
    assert t.estimated_seconds == pytest.approx(600)  # 300 MB at 0.5 MB/s
    assert not t.meets_deadline
    assert "cannot finish in 200 s" in t.note and "600 s" in t.note and "broker 1" in t.note


def test_a_broker_without_spare_capacity_gets_the_floor_and_says_so():
    hot = BrokerLoad(
        network_in=0.0, network_out=9 * MB, capacity_network_in=10 * MB, capacity_network_out=10 * MB
    )
    produce = 0.02 * MB
    t = compute_throttle(
        worked_batch(),
        seconds_left=200,
        broker_load=loads() | {1: hot},
        capacity_threshold=0.8,
        partition_traffic={("t", p): produce for p in range(3)},
    )
    metered = 3 * 2 * produce  # two followers per partition during the move
    floor = metered + FLOOR_CAPACITY_SHARE * 10 * MB
    assert t.rate_by_broker[1] == pytest.approx(floor)
    assert t.estimated_seconds == pytest.approx(300 * MB / (floor - metered))
    assert not t.meets_deadline
    assert "broker 1 has no spare network_out" in t.note and "floor" in t.note


def test_receiver_side_is_capped_by_network_in():
    busy_in = BrokerLoad(
        network_in=7.9 * MB, network_out=0.0, capacity_network_in=10 * MB, capacity_network_out=10 * MB
    )
    t = compute_throttle(
        worked_batch(),
        seconds_left=100,
        broker_load=loads() | {2: busy_in},
        capacity_threshold=0.8,
        partition_traffic={("t", p): 0.0 for p in range(3)},
    )
    assert t.rate_by_broker[2] == pytest.approx(0.1 * MB)  # 8 - 7.9 MB/s spare (above the 0.1 MB/s floor)
    assert t.estimated_seconds == pytest.approx(1000)
    assert not t.meets_deadline and "broker 2" in t.note


def test_leadership_batch_needs_no_throttle():
    lead = leadership("t")
    (batch,) = split_batches([lead])
    t = compute_throttle(batch, seconds_left=10, broker_load={}, capacity_threshold=0.8, partition_traffic={})
    assert t.rate_by_broker == {} and t.estimated_seconds == 0 and t.meets_deadline


def test_schedule_splits_the_deadline_in_proportion_to_bytes():
    lead = leadership("u")
    # Batch limit 1 move per broker: broker 1 sends 100 MB in one batch and 300 MB in the next.
    plan = [lead, move(0, (1, 5), (1, 2), 100 * MB), move(1, (1, 5), (1, 3), 300 * MB)]
    batches = split_batches(plan, max_partition_moves_per_broker=1)
    assert [b.kind for b in batches] == ["leadership", "replica_move", "replica_move"]
    traffic = {("t", 0): 0.0, ("t", 1): 0.0}
    s = plan_schedule(
        batches, deadline_seconds=400, broker_load=loads(), capacity_threshold=0.8, partition_traffic=traffic
    )
    assert [t.batch for t in s.throttles] == [0, 1, 2]
    assert s.throttles[1].rate_by_broker[1] == pytest.approx(1 * MB)  # 100 MB in 100 s
    assert s.throttles[2].rate_by_broker[1] == pytest.approx(1 * MB)  # 300 MB in 300 s
    assert s.estimated_seconds == pytest.approx(400) and s.meets_deadline and s.note is None
    slow = plan_schedule(
        batches, deadline_seconds=40, broker_load=loads(), capacity_threshold=0.8, partition_traffic=traffic
    )
    assert slow.meets_deadline is True  # 10 MB/s is well within 800 MB/s spare
    tight = BrokerLoad(
        network_in=0.0, network_out=0.0, capacity_network_in=1 * MB, capacity_network_out=1 * MB
    )
    late = plan_schedule(
        batches,
        deadline_seconds=100,
        broker_load=loads() | {1: tight},
        capacity_threshold=0.5,
        partition_traffic=traffic,
    )
    assert not late.meets_deadline and late.estimated_seconds == pytest.approx(800)  # 400 MB at 0.5 MB/s
    assert "800 s" in late.note


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"seconds_left": 0}, "seconds_left"),
        ({"seconds_left": math.inf}, "seconds_left"),
        ({"capacity_threshold": 1.5}, "capacity_threshold"),
        ({"capacity_threshold": 0}, "capacity_threshold"),
        ({"broker_load": {1: BIG}}, "broker 2"),
        ({"partition_traffic": {}}, "partition_traffic"),
    ],
)
def test_arguments_are_validated_naming_them(kwargs, message):
    args = dict(
        seconds_left=10,
        broker_load=loads(),
        capacity_threshold=0.8,
        partition_traffic={("t", p): 0.0 for p in range(3)},
    )
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        compute_throttle(worked_batch(), **args)


def test_broker_load_is_validated():
    with pytest.raises(ValueError, match="capacity_network_in"):
        BrokerLoad(network_in=0, network_out=0, capacity_network_in=0, capacity_network_out=1)
    with pytest.raises(ValueError, match="network_out"):
        BrokerLoad(network_in=0, network_out=-1, capacity_network_in=1, capacity_network_out=1)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.permutations(range(1, 7)), st.integers(1, 2), st.integers(0, 10**10), st.floats(0, 5 * MB)
        ),
        min_size=1,
        max_size=12,
    ),
    st.dictionaries(st.integers(1, 6), st.tuples(st.floats(0, 120 * MB), st.floats(0, 120 * MB)), min_size=6),
    st.floats(1, 10**5),
    st.floats(0.1, 1.0),
)
def test_throttle_invariants(moves, busy, seconds_left, threshold):
    actions, traffic = [], {}
    for p, (order, moved, size, bytes_in) in enumerate(moves):
        old, new = order[:3], order[: 3 - moved] + order[3 : 3 + moved]
        new = (new[0],) + tuple(new[1:])
        actions.append(
            Action(
                kind="replica_move",
                topic="t",
                partition=p,
                old_replicas=tuple(old),
                new_replicas=tuple(new),
                old_leader=old[0],
                new_leader=new[0],
                bytes_to_move=size * moved,
            )
        )
        traffic[("t", p)] = bytes_in
    loads = {b: BrokerLoad(busy[b][0], busy[b][1], 100 * MB, 100 * MB) for b in range(1, 7)}
    batch = Batch(0, "replica_move", tuple(actions))
    t = compute_throttle(
        batch,
        seconds_left=seconds_left,
        broker_load=loads,
        capacity_threshold=threshold,
        partition_traffic=traffic,
    )
    assert set(t.rate_by_broker) == set(batch.brokers)
    assert sum(t.send_bytes.values()) == batch.bytes_to_move
    assert all(r > 0 and math.isfinite(r) for r in t.rate_by_broker.values())
    assert math.isfinite(t.estimated_seconds) and t.estimated_seconds >= 0
    assert t.meets_deadline == (t.estimated_seconds <= seconds_left * (1 + 1e-9))
    if not t.meets_deadline:
        assert "cannot finish" in t.note
    # Safety: no rate goes past what the broker has spare (plus, for a sender, the replication of its
    # moving partitions already in its load) unless the floor sets it; a broker at the floor is named.
    for b, rate in t.rate_by_broker.items():
        sending = [a for a in actions if a.old_leader == b]
        receiving = [a for a in actions if b in set(a.new_replicas) - set(a.old_replicas)]
        room, floor = [], [MIN_RATE]
        if sending:
            flowing = sum(traffic[("t", a.partition)] * (len(a.old_replicas) - 1) for a in sending)
            room.append(100 * MB * threshold - busy[b][1] + flowing)
            followers = sum(
                traffic[("t", a.partition)] * (len(set(a.old_replicas) | set(a.new_replicas)) - 1)
                for a in sending
            )
            floor.append(followers + FLOOR_CAPACITY_SHARE * 100 * MB)
        if receiving:
            room.append(100 * MB * threshold - busy[b][0])
            fetched = sum(traffic[("t", a.partition)] for a in receiving)
            floor.append(fetched + FLOOR_CAPACITY_SHARE * 100 * MB)
        assert rate <= max(min(room), max(floor)) * (1 + 1e-9)
        if rate > max(min(room), 0.0) + 1e-9 * 100 * MB:
            assert f"broker {b} has" in t.note and "floor" in t.note
