"""benchmarks/planner_bench.py's lower bound for any plan against a reference: never above the true
optimum."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from planner_bench import data_lower_bound, network_in_move_bound

from balancer.planner import PlannerOptions, plan

CAP = {"network_in": 100.0, "network_out": 1000.0, "disk": 1e6}
# (bytes_in, size) of broker 0's replicas (RF 1); brokers 1 and 2 hold one light replica each.
HOT = [(9.0, 30.0), (7.0, 50.0), (6.0, 12.0), (5.0, 40.0), (4.0, 9.0), (3.0, 20.0), (2.0, 3.0), (1.0, 2.0)]


def _snapshot():
    parts = [(0, bi, sz) for bi, sz in HOT] + [(1, 2.0, 1.0), (2, 2.0, 1.0)]
    return {
        "cluster": "t",
        "brokers": [{"id": i, "capacity": dict(CAP)} for i in range(3)],
        "partitions": [
            {
                "topic": "t",
                "partition": i,
                "replicas": [b],
                "leader": b,
                "bytes_in": bi,
                "bytes_out": 0.0,
                "size": sz,
            }
            for i, (b, bi, sz) in enumerate(parts)
        ],
    }


def _brute_force(threshold, max_moves, max_bytes):
    total_in = sum(bi for bi, _ in HOT) + 4.0
    need = sum(bi for bi, _ in HOT) - threshold * total_in / 3
    least, fewest = float("inf"), float("inf")
    for n in range(len(HOT) + 1):
        for group in itertools.combinations(HOT, n):
            if sum(bi for bi, _ in group) >= need:
                size = sum(sz for _, sz in group)
                if n <= max_moves:
                    least = min(least, size)
                if size <= max_bytes:
                    fewest = min(fewest, n)
    return least, fewest


@pytest.mark.parametrize("max_moves, max_bytes", [(1, 40.0), (2, 60.0), (3, 25.0), (8, 100.0)])
def test_bound_is_never_above_the_optimum(max_moves, max_bytes):
    snap = _snapshot()
    total = sum(p["size"] for p in snap["partitions"])
    bound = network_in_move_bound(snap, 1.10, max_moves=max_moves, max_bytes=max_bytes)
    least, fewest = _brute_force(1.10, max_moves, max_bytes)
    assert bound["least_share"] * total <= least + 1e-6
    assert bound["fewest_moves"] <= fewest


def test_bound_is_never_above_a_real_plan():
    snap = _snapshot()
    result = plan(snap, PlannerOptions(balance_threshold=1.10))
    assert result.after["network_in"] <= 1.10
    bound = network_in_move_bound(snap, 1.10, max_moves=result.replica_moves, max_bytes=result.bytes_to_move)
    assert bound["least_share"] * result.total_bytes <= result.bytes_to_move + 1e-6
    assert bound["fewest_moves"] <= result.replica_moves


@pytest.mark.parametrize("disk_figure", [1.2, 1.5, 2.0, 2.9])
def test_joint_data_bound_is_never_above_the_optimum(disk_figure):
    """Broker 0 must shed replicas covering both its network_in excess over 1.10 and its disk
    excess over ``disk_figure``: the joint bound never exceeds the least data of any such set
    (which no full plan can beat), nor falls below either single bound."""
    snap = _snapshot()
    total = sum(p["size"] for p in snap["partitions"])
    options = PlannerOptions(balance_threshold=1.10)
    bound = data_lower_bound(snap, {"network_in": 1.10, "disk": disk_figure}, options)
    total_in = sum(bi for bi, _ in HOT) + 4.0
    in_need = sum(bi for bi, _ in HOT) - 1.10 * total_in / 3
    disk_need = sum(sz for _, sz in HOT) - disk_figure * total / 3
    least = min(
        sum(sz for _, sz in group)
        for n in range(len(HOT) + 1)
        for group in itertools.combinations(HOT, n)
        if sum(bi for bi, _ in group) >= in_need and sum(sz for _, sz in group) >= disk_need
    )
    assert bound["joint"] * total <= least + 1e-6
    assert bound["joint"] >= max(bound["network_in"], bound["disk"]) - 1e-12
    assert bound["bound"] == bound["joint"]
