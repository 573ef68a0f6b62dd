"""The simulated cluster: telemetry it reports, and plans carried out the way Kafka would."""

from __future__ import annotations

from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.demo.simulator import SimulatedCluster
from balancer.planner import PlannerOptions, broker_loads, plan


def network_balance(snapshot: dict) -> dict[str, float]:
    loads = broker_loads(snapshot)
    capacity = {b["id"]: b["capacity"] for b in snapshot["brokers"]}
    figures = {}
    for resource in ("network_in", "network_out"):
        cluster = sum(load[resource] for load in loads.values()) / sum(c[resource] for c in capacity.values())
        figures[resource] = max(loads[b][resource] / capacity[b][resource] for b in loads) / cluster
    return figures


def test_executed_plan_gives_the_predicted_balance():
    spec = ScenarioSpec(brokers=6, racks=3, topics=12, new_empty_brokers=2, restarted_broker=1, seed=5)
    cluster = SimulatedCluster(generate(spec), noise=0.0, throttle_bytes_per_sec=1e6)
    result = plan(cluster.snapshot(), PlannerOptions())
    assert result.leader_moves > 0 and result.replica_moves > 0

    cluster.apply(result.to_reassignment(), 0, election=result.to_election())
    assert cluster.busy  # replica moves wait for their data to be copied at the throttle rate
    cluster.telemetry(10**12)  # far enough in the future for every copy to finish
    assert not cluster.busy
    measured = network_balance(cluster.snapshot())
    for resource, figure in measured.items():
        assert abs(figure - result.after[resource]) < 1e-9, resource


def test_telemetry_has_one_report_per_replica_and_broker():
    spec = ScenarioSpec(brokers=3, racks=0, topics=2, partitions_per_topic=(2, 2), replication_factor=2)
    cluster = SimulatedCluster(generate(spec), noise=0.0)
    records = cluster.telemetry(1_790_000_000_000)
    partition_reports = [r for r in records if r["type"] == "partition"]
    assert len(partition_reports) == 4 * 2 and sum(r["type"] == "broker" for r in records) == 3
    leaders = [r for r in partition_reports if r["leader"]]
    assert len(leaders) == 4 and all(r["bytes_out"] == 0 for r in partition_reports if not r["leader"])

    cluster.silent_brokers.add(0)
    assert all(r["broker"] != 0 for r in cluster.telemetry(1_790_000_060_000))
