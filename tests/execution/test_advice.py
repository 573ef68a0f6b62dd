from __future__ import annotations

import pytest

from balancer.execution.advice import ORDERING_CAVEAT, Advice, advise
from balancer.execution.verdict import unmet_goals
from balancer.planner import ClusterModel, PlannerOptions, plan

MB = 1e6


def snapshot(n_brokers, partitions, capacity=100 * MB):
    brokers = [
        {"id": b, "capacity": {"network_in": capacity, "network_out": capacity, "disk": 1e12}}
        for b in range(n_brokers)
    ]
    return {"cluster": "c", "brokers": brokers, "partitions": partitions}


def part(topic, p, replicas, bytes_in, bytes_out, size=1e9):
    return {
        "topic": topic,
        "partition": p,
        "replicas": list(replicas),
        "leader": replicas[0],
        "bytes_in": bytes_in,
        "bytes_out": bytes_out,
        "size": size,
    }


def even(n_brokers, topic="cold", count=16, bytes_in=0.5 * MB, bytes_out=0.5 * MB):
    return [part(topic, p, (p % n_brokers, (p + 1) % n_brokers), bytes_in, bytes_out) for p in range(count)]


def test_one_partition_hotter_than_the_band_on_any_broker_needs_more_partitions():
    # network_out: the hot leader serves 40 + 10 x (RF-1) = 50 MB/s; the cluster's 66 MB/s over 400 MB/s is
    # 16.5%, so the band on a 100 MB/s broker is 18.15 MB/s: ceil(50 / 18.15) = 3 partitions, add 2.
    # network_in: 10 MB/s per replica against a 9.9 MB/s band (36 / 400 x 1.1): needs 2; the larger count
    # wins.
    snap = snapshot(4, even(4) + [part("hot", 0, (0, 1), 10 * MB, 40 * MB)])
    options = PlannerOptions()
    result = plan(snap, options)
    advice = advise(snap, result, options)
    (grow,) = [a for a in advice if a.kind == "add_partitions"]
    assert grow.topic == "hot" and grow.partitions_to_add == 2
    assert "from 1 to 3 partitions" in grow.message and "network_out" in grow.message
    assert "kafka-topics.sh --alter --topic hot --partitions 3" in grow.message
    assert ORDERING_CAVEAT in grow.message and "per-key order" in grow.message
    assert "With 1 partition(s) on 4 brokers" in grow.message
    # The planner agrees no plan can meet the threshold: its lower bound is above it.
    assert result.lower_bound["network_out"] > options.balance_threshold
    assert not any(a.kind == "no_action" for a in advice)
    # A ClusterModel of the same snapshot gives the same advice.
    assert advise(ClusterModel(snap, options), result, options) == advice


def test_a_replicated_partition_hotter_than_the_band_of_all_but_the_largest_broker_needs_more_partitions():
    # network_in capacities 300/100/100/100 MB/s: 56 MB/s in is 9.33%, so the band is 30.8 MB/s on the
    # big broker and 10.3 on the others. hot-0 takes 20 MB/s on each of its two replicas: one fits the big
    # broker's band, the other lands on a 100 MB/s broker whatever the plan, so moves cannot fix it.
    brokers = [
        {"id": b, "capacity": {"network_in": c * MB, "network_out": c * MB, "disk": 1e12}}
        for b, c in enumerate([300, 100, 100, 100])
    ]
    parts = even(4, bytes_out=2 * MB) + [part("hot", 0, (0, 1), 20 * MB, 1 * MB)]
    snap = {"cluster": "c", "brokers": brokers, "partitions": parts}
    options = PlannerOptions()
    result = plan(snap, options)
    assert result.lower_bound["network_in"] == pytest.approx(20 / 100 / (56 / 600), rel=1e-9)
    assert result.after["network_in"] <= 1.02 * result.lower_bound["network_in"]
    advice = advise(snap, result, options)
    (grow,) = [a for a in advice if a.kind == "add_partitions"]
    assert grow.topic == "hot" and grow.partitions_to_add == 1
    assert "network_in is 20 MB/s, above the 10.3 MB/s band" in grow.message
    assert "network_out" not in grow.message
    # The verdict names the same partition as what binds network_in.
    (unmet,) = [
        u for u in unmet_goals(ClusterModel(snap, options), options) if u.goal == "network_in_distribution"
    ]
    assert (unmet.binding_topic, unmet.binding_partition) == ("hot", 0)
    assert "on each of its 2 replicas' brokers" in unmet.binding


def test_few_partitions_that_fit_the_band_are_balanced_by_moves_not_advice():
    # 8 brokers; 6 partitions carry 60% of the traffic but each 10% is below the 13.75% band: moves fix it.
    parts = [part("big", p, (0, 1), 10 * MB, 10 * MB) for p in range(6)]
    parts += [part("small", p, (p % 8, (p + 3) % 8), 10 * MB / 16, 10 * MB / 16) for p in range(64)]
    snap = snapshot(8, parts)
    result = plan(snap)
    advice = advise(snap, result)
    assert [a.kind for a in advice] == ["move_replicas"]
    assert "leadership transfer" in advice[0].message


def test_balanced_cluster_needs_no_action():
    snap = snapshot(4, even(4))
    result = plan(snap)
    assert not result.actions
    assert advise(snap, result) == [
        Advice(
            "no_action", None, "the cluster is within its balance and capacity thresholds: no action needed."
        )
    ]


def test_a_cluster_above_capacity_threshold_needs_brokers():
    # 16 partitions x 2 replicas x 6 MB/s in = 192 MB/s over 4 x 50 MB/s = 96% > 80%: 192 / 40 = 4.8 -> 5
    # brokers.
    snap = snapshot(4, even(4, bytes_in=6 * MB, bytes_out=0.1 * MB), capacity=50 * MB)
    advice = advise(snap, plan(snap))
    grow = [a for a in advice if a.kind == "add_brokers"]
    assert [a.brokers_to_add for a in grow] == [1] and "network_in" in grow[0].message


def test_arguments_are_checked():
    snap = snapshot(4, even(4))
    with pytest.raises(TypeError, match="options"):
        advise(snap, plan(snap), {"balance_threshold": 1.1})
    with pytest.raises(TypeError, match="result"):
        advise(snap, {"actions": []})
    assert advise(snap, plan(snap))[0].to_dict()["kind"] == "no_action"


def test_a_full_rack_is_named_as_what_binds_the_racks_that_carry_the_rest():
    # Six brokers in five racks, RF 4: rack-0's two brokers hold at most one replica of each
    # partition (a quarter of the traffic), so the four other racks average 1.125 of the cluster's
    # network_in whatever the placement: above the 1.10 threshold, and rack-0 is why.
    from balancer.demo.scenarios import ScenarioSpec, generate
    from balancer.execution.verdict import judge

    snap = generate(ScenarioSpec(brokers=6, racks=5, topics=60, replication_factor=4, skew=0.6, seed=11))
    options = PlannerOptions()
    verdict = judge(snap, plan(snap, options), options)
    (unmet,) = [u for u in verdict.unmet if u.goal == "network_in_distribution"]
    rack0 = tuple(b["id"] for b in snap["brokers"] if b["rack"] == snap["brokers"][0]["rack"])
    assert len(rack0) == 2
    assert unmet.lower_bound == pytest.approx(1.125, rel=1e-6)
    assert unmet.binding_brokers == rack0
    assert unmet.binding.startswith(f"rack {snap['brokers'][0]['rack']} (brokers "), unmet.binding
    assert "can hold one replica of each partition at most" in unmet.binding, unmet.binding


def test_racks_that_must_hold_every_partition_are_named_as_what_binds():
    # Four brokers in three racks, RF 3: each rack holds a replica of every partition, so the two
    # single-broker racks carry a third of the traffic each on a quarter of the capacity: 1.33x
    # the cluster's network_in whatever the placement.
    from balancer.demo.scenarios import ScenarioSpec, generate
    from balancer.execution.verdict import judge

    snap = generate(ScenarioSpec(brokers=4, racks=3, topics=40, replication_factor=3, skew=0.6, seed=5))
    options = PlannerOptions()
    verdict = judge(snap, plan(snap, options), options)
    (unmet,) = [u for u in verdict.unmet if u.goal == "network_in_distribution"]
    racks = {b["id"]: b["rack"] for b in snap["brokers"]}
    alone = sorted(b for b, r in racks.items() if list(racks.values()).count(r) == 1)
    assert len(alone) == 2
    assert unmet.lower_bound == pytest.approx(4 / 3, rel=1e-6)
    assert unmet.binding_brokers == tuple(alone)
    names = ", ".join(sorted(racks[b] for b in alone))
    assert unmet.binding.startswith(f"rack {names} (brokers "), unmet.binding
    assert "must hold a replica of every partition" in unmet.binding, unmet.binding
