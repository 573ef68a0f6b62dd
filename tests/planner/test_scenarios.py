"""The scenario generator: Kafka's default placement, seeded, with the spec's event applied."""

from __future__ import annotations

from collections import Counter

import pytest

from balancer.demo.scenarios import ScenarioSpec, assign_replicas, generate, rack_alternated
from balancer.planner import broker_loads


def test_rack_unaware_placement_matches_kafkas_admin_utils_test():
    # AdminUtilsTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3, fixed start index 0.
    got = assign_replicas(10, 3, [0, 1, 2, 3, 4], None, 0, 0).tolist()
    assert got == [
        [0, 1, 2],
        [1, 2, 3],
        [2, 3, 4],
        [3, 4, 0],
        [4, 0, 1],
        [0, 2, 3],
        [1, 3, 4],
        [2, 4, 0],
        [3, 0, 1],
        [4, 1, 2],
    ]


def test_rack_alternated_list_matches_kafka():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(list(racks), racks) == [0, 3, 1, 5, 4, 2]


def test_rack_aware_placement_spreads_replicas_and_leaders():
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
    got = assign_replicas(60, 3, list(racks), racks, 2, 0)
    assert all(len({racks[b] for b in row}) == 3 for row in got.tolist())
    assert set(Counter(got[:, 0].tolist()).values()) == {10}
    assert set(Counter(got.ravel().tolist()).values()) == {30}


def test_generate_is_seeded_and_applies_events():
    spec = ScenarioSpec(brokers=6, racks=3, topics=12, new_empty_brokers=2, restarted_broker=1, seed=9)
    snap = generate(spec)
    assert snap == generate(spec) and snap != generate(ScenarioSpec(brokers=6, racks=3, topics=12, seed=10))
    loads = broker_loads(snap)
    assert loads[6]["replicas"] == loads[7]["replicas"] == 0
    assert loads[1]["leaders"] == 0 and loads[1]["replicas"] > 0
    assert sum(p["bytes_in"] for p in snap["partitions"]) == pytest.approx(spec.total_bytes_in)


def test_heterogeneous_capacity_and_skew():
    snap = generate(ScenarioSpec(brokers=9, heterogeneous_capacity=True, skew=0.8, topics=40, seed=4))
    assert len({b["capacity"]["network_in"] for b in snap["brokers"]}) > 1
    rates = sorted(p["bytes_in"] for p in snap["partitions"])
    assert rates[-1] > 20 * rates[len(rates) // 2]  # heavy tail


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"brokers": 0}, "brokers"),
        ({"replication_factor": 7}, "replication_factor"),
        ({"partitions_per_topic": (5, 2)}, "partitions_per_topic"),
        ({"restarted_broker": 6}, "restarted_broker"),
        ({"skew": -1}, "skew"),
        ({"racks": 9}, "racks"),
    ],
)
def test_spec_validation_names_the_field(kwargs, name):
    with pytest.raises(ValueError, match=name):
        ScenarioSpec(**kwargs)


def test_hot_key_sigma_widens_the_tail_inside_topics():
    base = dict(brokers=7, racks=0, topics=30, replication_factor=2, skew=1.0, seed=3)

    def top_share(sigma):
        rates = sorted(
            (p["bytes_in"] for p in generate(ScenarioSpec(**base, hot_key_sigma=sigma))["partitions"]),
            reverse=True,
        )
        return sum(rates[:10]) / sum(rates)

    assert top_share(1.0) > top_share(0.5)
    with pytest.raises(ValueError, match="hot_key_sigma"):
        ScenarioSpec(hot_key_sigma=-0.1)
