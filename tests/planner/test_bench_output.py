"""benchmarks/planner_bench.py's output: a plan's data as a multiple of its data bound, and none ("n/a")
of a negligible bound, which no summary counts."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from planner_bench import (
    NEGLIGIBLE_BOUND,
    bound_multiple,
    data_bound_line,
    data_lower_bound,
    every_goal,
    fleet_cluster,
    heldout_moved,
    heldout_within,
    main,
    missed_floors,
    moves_bound_line,
    plan_outcome,
)

from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.planner import PlannerOptions, plan

# A held-out line's data and moves, in the form other scripts parse.
HELDOUT_ROW = re.compile(r"moved ([\d.]+)% = ([\d.]+)x the data bound, (\d+) replica / (\d+) leader")


def _parts(bound: float, single: float) -> dict:
    """A ``data_lower_bound`` result whose bound is ``bound`` and largest single part ``single``."""
    return {
        "network_in": single,
        "disk": single / 2,
        "drained": 0.0,
        "replicas": 0.0,
        "arrive": 0.0,
        "joint": single,
        "coupled": single,
        "placement": bound,
        "bound": bound,
    }


def test_a_bound_gives_a_multiple_in_the_parsed_form():
    multiple = bound_multiple(0.0258, 0.0235)
    assert multiple == pytest.approx(0.0258 / 0.0235)
    row = HELDOUT_ROW.search(heldout_moved(0.0258, 0.0235, multiple, 3, 356))
    assert row and row.groups() == ("2.58", "1.10", "3", "356")
    line = data_bound_line(_parts(0.0235, 0.0208), 0.0258)
    assert line.endswith("-> >= 2.35%; planner moved 2.58% = 1.10x the bound (1.24x the largest single one)")


@pytest.mark.parametrize("bound", [0.0, NEGLIGIBLE_BOUND / 2])  # none, and one printed as 0.00%
def test_a_negligible_bound_gives_no_multiple(bound):
    assert bound_multiple(0.005, bound) is None
    row = heldout_moved(0.005, bound, None, 0, 356)
    assert row == "moved 0.50%, data bound 0.00% (multiple n/a), 0 replica / 356 leader moves"
    assert not HELDOUT_ROW.search(row)  # no multiple for a parser to read
    line = data_bound_line(_parts(bound, bound), 0.005)
    assert line.endswith("planner moved 0.50%; the bound is negligible: multiple n/a")


def test_a_negligible_single_part_gives_no_multiple_of_it():
    line = data_bound_line(_parts(0.0235, 0.0), 0.0258)
    assert line.endswith("= 1.10x the bound (the largest single one negligible)")


def test_the_summary_counts_only_plans_with_a_multiple():
    assert heldout_within([1.0, 1.2]) == "2 of 2 within 1.25x the data bound (median 1.10x, worst 1.20x)"
    assert heldout_within([1.1, None, 2.0]) == (
        "1 of 2 within 1.25x the data bound (median 1.55x, worst 2.00x), "
        "1 more with a negligible data bound (n/a)"
    )
    assert heldout_within([None]) == (
        "0 of 0 within 1.25x the data bound (median n/a), 1 more with a negligible data bound (n/a)"
    )


def test_a_leadership_only_plan_has_no_multiple():
    # A broker that lost its leaderships, planned with disk left alone: leadership changes alone reach
    # the traffic goals, so no replica moves and the data bound is 0.
    snap = generate(
        ScenarioSpec(
            brokers=6, racks=3, topics=30, partitions_per_topic=(6, 12), skew=0.5, restarted_broker=2, seed=8
        )
    )
    options = PlannerOptions(balance_threshold=1.2, disk_balance_threshold=2.0)
    result = plan(snap, options)
    assert result.replica_moves == 0 and result.leader_moves > 0
    bound = data_lower_bound(snap, plan_outcome(snap, result, options), options)
    share = result.bytes_to_move / result.total_bytes
    assert bound_multiple(share, bound["bound"]) is None
    assert data_bound_line(bound, share).endswith("the bound is negligible: multiple n/a")


def test_the_moves_line_gives_the_planners_moves_as_a_multiple_of_the_fewest_any_plan_needs():
    line = moves_bound_line(1005, 2624, 1.045)
    assert line.endswith("makes >= 1005; the planner made 2624 = 2.61x the bound")
    assert "network_in to <= 1.045" in line
    assert "no plan" in moves_bound_line(float("inf"), 12, 1.1)


def test_the_fleet_clusters_are_the_fleet_benchmarks():
    # Clusters 5 and 19 of the fleet benchmark (its default seed) have 52 and 41 brokers and two new
    # empty ones, as the tests that plan them name.
    for number, brokers in ((5, 52), (19, 41)):
        snapshot = fleet_cluster(number)
        assert len(snapshot["brokers"]) == brokers + 2
        assert sum(len(p["replicas"]) for p in snapshot["partitions"]) == 19_968  # 16 topics x 416 x RF 3


def test_fleet_prints_a_line_per_cluster_in_the_parsed_form_and_the_count_within(capsys):
    assert main(["--fleet", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(
        f"fleet  0: {len(fleet_cluster(0)['brokers']) - 2} brokers + 2 new, every goal "
    )
    assert HELDOUT_ROW.search(lines[0])
    assert re.fullmatch(
        r"fleet: [01] of 1 within 1\.25x the data bound \(median [\d.]+x, worst [\d.]+x\)", lines[1]
    )


def test_every_goal_names_a_replica_count_the_plan_leaves_outside_its_band():
    """Fleet cluster 2's plan fills its empty brokers with many small replicas: its traffic goals are
    met, its replica count goal is not. The verdict says NO and names it, and the counts agree: some
    broker ends outside the count goal's integer band, computed here from the plan's placement."""
    snapshot = fleet_cluster(2)
    options = PlannerOptions()
    result = plan(snapshot, options)
    verdict, met = every_goal(result, options, floors={})
    assert not met and verdict.startswith("NO (") and "replicas_distribution" in verdict
    changed = {(a.topic, a.partition): a.new_replicas for a in result.actions}
    counts = dict.fromkeys((b["id"] for b in snapshot["brokers"]), 0)
    for p in snapshot["partitions"]:
        for b in changed.get((p["topic"], p["partition"]), p["replicas"]):
            counts[b] += 1
    avg = sum(counts.values()) / len(counts)
    threshold = options.threshold("replicas")
    top, bottom = math.ceil(avg * threshold - 1e-9), math.floor(avg * (2 - threshold) + 1e-9)
    assert max(counts.values()) > top or min(counts.values()) < bottom


def test_every_goal_says_no_where_a_broker_is_left_under_a_traffic_floor():
    """Fleet cluster 3's plan meets every goal; told that a broker ends under network_in's floor
    (``missed_floors``, which the balance figure never shows), the verdict says NO and names it."""
    snapshot = fleet_cluster(3)
    options = PlannerOptions()
    result = plan(snapshot, options)
    assert missed_floors(snapshot, plan_outcome(snapshot, result, options), options) == {}
    assert every_goal(result, options, floors={}) == ("yes", True)
    verdict, met = every_goal(result, options, floors={"network_in": 0.3})
    assert not met and verdict == "NO (network_in floor: a broker at 0.30x the average)"
