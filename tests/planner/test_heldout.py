"""Held-out clusters (`planner_bench.heldout_clusters`, and one of the fleet benchmark's) where a
planner rule decides the outcome: each test fails with its rule broken."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from planner_bench import (
    SCENARIOS,
    data_lower_bound,
    fleet_cluster,
    heldout_clusters,
    missed_floors,
    missed_goals,
    plan_outcome,
)

import balancer.planner
import balancer.planner.search
from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.planner import PlannerOptions, plan
from balancer.planner.result import Plan
from balancer.planner.validate import check_plan


def heldout(seed: int, k: int) -> dict:
    """Held-out cluster ``k`` of ``seed`` (as ``planner_bench.py --heldout`` draws it)."""
    _, _, _, snap = next(itertools.islice(heldout_clusters(k + 1, seed), k, None))
    return snap


def planned(seed: int, k: int) -> tuple[dict, PlannerOptions, Plan]:
    """Held-out cluster ``k`` of ``seed`` planned by the goals' search alone (the rules under test
    are the search's; the relaxation's second plan could hide a broken one); the plan is valid."""
    snap, options = heldout(seed, k), PlannerOptions(relax=False)
    result = plan(snap, options)
    assert check_plan(snap, result) == []
    return snap, options, result


def bound_multiple(snap: dict, options: PlannerOptions, result: Plan) -> float:
    """The share of the data ``result`` copies over the data bound for its outcome; the plan is
    valid and meets every goal."""
    assert check_plan(snap, result) == []
    assert missed_goals(result, options) == {}
    bound = data_lower_bound(snap, plan_outcome(snap, result, options), options, placement=False)["bound"]
    return result.bytes_to_move / result.total_bytes / bound


def test_an_unmet_capacity_goal_does_not_trade_later_goals_balance_in_a_later_sweep(monkeypatch):
    # A held-out cluster (seed 1001, #13) whose disks cannot all go under the capacity threshold.
    # After the first sweep the other goals' moves leave the capacity goal a sliver of room; taken
    # freely, one disk move there takes network in from 1.62 to 1.96 of the average.
    snap, options, result = planned(1001, 13)
    assert "capacity_disk" in result.unmet_goals, result.unsatisfied
    with monkeypatch.context() as m:
        m.setattr(balancer.planner, "MAX_SWEEPS", 1)
        first = plan(snap, options)
    assert first.after["network_in"] == pytest.approx(1.622, abs=0.01)  # what the first sweep leaves
    assert result.after["network_in"] <= first.after["network_in"] + 1e-9


def test_a_receiver_over_its_limit_hands_one_of_its_own_heavy_leaderships_on():
    # A held-out cluster (seed 314, #13): broker 5 leads one partition of 1.3x the average broker's
    # network out on 1.03x capacity; its follower on a 1.37x broker has room only once it hands
    # one of its own heavy leaderships on to a follower of that one, which sheds light ones.
    _, options, result = planned(314, 13)
    assert result.before["network_out"] > 1.25
    assert missed_goals(result, options, ("network_out",)) == {}


def test_leaderships_assigned_as_a_whole_spare_the_replica_moves_greedy_transfers_need(monkeypatch):
    # A held-out cluster (seed 2026, #11): two brokers under network_out's floor can reach it by
    # leaderships alone only if leaderships pass on over several hops at once; one hop at a time the
    # search runs out of transfers and fills them by replica moves, 2.3x the data bound.
    snap, options, result = planned(2026, 11)
    assert result.after["network_out"] <= options.balance_threshold
    bound = data_lower_bound(snap, plan_outcome(snap, result, options), options)["bound"]
    assert result.bytes_to_move <= 1.3 * bound * result.total_bytes
    with monkeypatch.context() as m:
        m.setattr(balancer.planner.search, "assign_leaderships", lambda ctx: False)
        greedy = plan(snap, options)
    assert greedy.after["network_out"] <= options.balance_threshold
    assert greedy.bytes_to_move > 1.5 * result.bytes_to_move


def test_moves_a_swap_makes_needless_go_back():
    # A held-out cluster (seed 99, #4): network_in's shed of its hottest broker places one hot
    # replica and then, its other hot replicas fitting nowhere, hundreds of colder ones before a
    # swap relieves more than half the excess alone. The moves the swap makes needless go back
    # (without that, 1.8x the data bound).
    snap, options, result = planned(99, 4)
    assert missed_goals(result, options, ("network_in",)) == {}
    bound = data_lower_bound(snap, plan_outcome(snap, result, options), options)["bound"]
    assert result.bytes_to_move <= 1.6 * bound * result.total_bytes


def test_a_fill_lifts_a_broker_over_the_disk_line_data_first():
    # A held-out cluster (seed 5, #8): broker 0 holds the most disk and the least network_in. Lifted
    # to network_in's floor in the search's few-big-moves order (the disk goal has work), it took
    # bytes the disk goal must move off again and sat at that floor, where no cold replica may
    # leave: disk ended at 1.21 of the average. Lifted data first, every goal ends within its
    # threshold.
    _, options, result = planned(5, 8)
    assert missed_goals(result, options) == {}


def test_a_traffic_shed_off_a_broker_within_the_disk_line_puts_data_first():
    # The same cluster (seed 5, #8): network_in's shed of brokers whose disk is within the disk
    # goal's line. Sized for few big moves (as off a broker over the line, whose bytes the disk goal
    # would move anyway), its giants relieved traffic at many times the bytes a data-first order
    # copies, and the plan moved 1.6x its data bound; data first, it stays within 1.25x.
    snap, options, result = planned(5, 8)
    bound = data_lower_bound(snap, plan_outcome(snap, result, options), options)["bound"]
    assert result.bytes_to_move <= 1.25 * bound * result.total_bytes
    assert missed_goals(result, options) == {}


def test_a_disk_at_a_traffic_floor_sheds_by_pairs_whose_refill_is_up_to_half_the_size():
    # A held-out cluster (seed 314, #28): the disk goal's hottest broker sits at network_in's floor,
    # and traffic per byte varies little across partitions, so no replica a fifth the size of one
    # it could shed carries that one's network_in: no pair formed and disk ended at 1.117. Refills
    # up to half the size pair, and disk ends within its threshold.
    _, options, result = planned(314, 28)
    assert result.after["disk"] <= options.threshold("disk")
    assert missed_goals(result, options, ("network_in",)) == {}


def test_a_refill_frees_first_the_replicas_some_broker_has_room_for():
    # A held-out cluster (seed 7, #5): the disk goal's hottest broker sits at network_in's floor; the
    # brokers with disk room all sit in one rack, which most of its partitions already hold. Its
    # refill candidates, in size order, were such partitions: every pair failed to place the freed
    # replica, the refills stopped after their misses and disk ended at 1.128. Tried first, the
    # replicas a broker has room for pair, and disk ends within its threshold.
    _, options, result = planned(7, 5)
    assert result.after["disk"] <= options.threshold("disk")


def test_a_giant_replica_no_move_or_swap_places_goes_by_an_ejection_chain():
    # A held-out cluster (seed 5150, #24): one topic's five partitions each carry 0.6-1.0x a small
    # broker's share of network_in. Without ejection chains broker 4, a small one, ends holding two
    # of them at 1.30x the average: every broker with room for one is near the top of its band, so
    # no move or swap places either, and the search copies 42% of the data getting there. A big
    # broker that takes one and passes lighter replicas on brings network_in within the threshold.
    _, options, result = planned(5150, 24)
    assert result.before["network_in"] > 1.8
    assert missed_goals(result, options, ("network_in",)) == {}
    assert result.bytes_to_move / result.total_bytes < 0.25


def test_new_brokers_are_filled_with_traffic_dense_replicas_where_the_disks_need_little():
    # One of the fleet benchmark's clusters (the planner benchmark's fleet_scale_out: 24 brokers and
    # two new empty ones, RF 3, 3 racks): a few disks are a little over the disk goal's line, and one
    # topic carries a quarter of the bytes in on 3% of the bytes stored. Bytes the disk goal must
    # move anyway come free to a fill, and no more: charged the goal's ceiling per move instead, the
    # fill lifts the new brokers with big replicas of the cold topics and copies five times the data
    # bound.
    snap = generate(ScenarioSpec(**SCENARIOS["fleet_scale_out"]))
    options = PlannerOptions(relax=False)
    assert bound_multiple(snap, options, plan(snap, options)) <= 2.0


def test_a_second_search_fills_data_first_where_the_cost_order_copied_far_more():
    # Another of the fleet benchmark's clusters (52 brokers and two new empty ones): the disk goal
    # has work, so a fill takes few big moves, the disk excess of the brokers it fills from free;
    # where data first would have copied less by more than the data slack, ``plan`` searches again
    # with the fills data first and keeps that plan (less data, no goal worse, more moves).
    # (The fills drawing on the disk excess, a start of their own, are held out: they beat both here.)
    snap = fleet_cluster(5)
    options = PlannerOptions(relax=False, fill_disk_excess=False)
    result = plan(snap, options)
    cost_order = plan(snap, PlannerOptions(relax=False, fill_data_first=False, fill_disk_excess=False))
    assert result.bytes_to_move <= 0.8 * cost_order.bytes_to_move
    assert bound_multiple(snap, options, result) <= 1.6


def test_a_new_broker_fills_in_its_own_data_first_order_where_its_rack_narrows_the_pool():
    # Another of the fleet benchmark's clusters (41 brokers and two new empty ones, RF 3, 3 racks):
    # a new broker may take only its rack's replica of each partition. The data-first pool's
    # per-move cost is sized for every broker's need over the replicas of all racks; filled in that
    # order, the new broker on rack 0 copies seven times the least its own candidates need, and the
    # plan 1.7 times the data bound. Each broker fills in its own order where the pool's copies more
    # than the data slack over its least.
    snap = fleet_cluster(19)
    options = PlannerOptions(relax=False)
    assert bound_multiple(snap, options, plan(snap, options)) <= 1.25


def test_a_second_search_fills_off_the_disk_excess_where_the_first_filled_past_it():
    # The fleet benchmark's cluster 0 (58 brokers and two new empty ones, RF 3, 3 racks): a few dozen
    # disks stand just over the disk goal's line. The first search lifts the new brokers' traffic
    # off the hottest brokers, and the disk goal then moves the disk excess onto them as well: 1.37x
    # the data bound. ``plan`` searches again with the fills drawing first on the disks over the
    # line, up to their excess (bytes that goal must move anyway), and keeps that plan.
    snap = fleet_cluster(0)
    options = PlannerOptions(relax=False, counts_first=False)
    result = plan(snap, options)
    plain = plan(snap, PlannerOptions(relax=False, fill_disk_excess=False, counts_first=False))
    assert not check_plan(snap, result)
    assert bound_multiple(snap, options, result) <= 1.1 < 1.3 <= bound_multiple(snap, options, plain)
    assert missed_goals(result, options) == {}


def test_the_disk_excess_search_runs_only_where_the_fills_took_much_off_disks_within_the_line(monkeypatch):
    # Fleet cluster 0's fills took about a third of the plan's bytes off brokers within the disk
    # line while others stood over it: the second search runs. Past EXCESS_START_REPLICAS it does not
    # (its CPU would not fit the planning budget of a million-replica cluster), nor with the option
    # false.
    starts = []
    real = balancer.planner._search

    def spy(snapshot, goals, options, *args, **kwargs):
        starts.append(options.fill_disk_excess)
        return real(snapshot, goals, options, *args, **kwargs)

    monkeypatch.setattr(balancer.planner, "_search", spy)
    snap = fleet_cluster(0)
    plan(snap, PlannerOptions())
    assert starts.count(True) == 1
    starts.clear()
    plan(snap, PlannerOptions(fill_disk_excess=False))
    assert True not in starts
    monkeypatch.setattr(balancer.planner, "EXCESS_START_REPLICAS", len(snap["partitions"]))
    starts.clear()
    plan(snap, PlannerOptions())
    assert starts == [None]


def _count_met(result: Plan) -> bool:
    return next(r for r in result.goals if r.goal == "replicas_distribution").within_threshold


def test_the_counts_first_start_fills_new_brokers_with_their_share_of_replicas_and_copies_less():
    """Fleet cluster 15: the goals in their own order fill the two new brokers with hundreds of small
    replicas each, which leave the replica count goal no move; with that goal first (Cruise Control's
    order) the fills keep its band and copy less. ``plan`` tries that order (``counts_first`` None)
    where the first plan leaves the count goal unmet and keeps it: every goal's report in the
    default order, the count goal met, no traffic floor missed, less data, the plan valid."""
    snap = fleet_cluster(15)
    plain = plan(snap, PlannerOptions(counts_first=False))  # the goals in their own order
    assert not _count_met(plain)
    options = PlannerOptions()  # counts_first None
    chosen = plan(snap, options)
    assert check_plan(snap, chosen) == []
    assert _count_met(chosen)
    assert missed_floors(snap, plan_outcome(snap, chosen, options), options) == {}
    assert chosen.bytes_to_move < plain.bytes_to_move
    assert [r.goal for r in chosen.goals] == [r.goal for r in plain.goals]
    # Asked for always, the same order runs first: its plan meets the count goal too.
    assert _count_met(plan(snap, PlannerOptions(counts_first=True)))


def _lowest_network_in(snap: dict, result: Plan) -> float:
    """The lowest broker's network_in utilization once ``result`` is executed, as a multiple of the
    cluster's, from the plan's placement and the snapshot's capacities alone."""
    changed = {(a.topic, a.partition): a.new_replicas for a in result.actions}
    load = {b["id"]: 0.0 for b in snap["brokers"]}
    for p in snap["partitions"]:
        for b in changed.get((p["topic"], p["partition"]), p["replicas"]):
            load[b] += p["bytes_in"]
    cap = {b["id"]: b["capacity"]["network_in"] for b in snap["brokers"]}
    cluster = sum(load.values()) / sum(cap.values())
    return min(load[b] / cap[b] for b in load) / cluster


def test_a_plan_that_leaves_a_new_broker_under_a_traffic_floor_is_not_kept_for_its_data():
    """Fleet cluster 2 with the replica count goal first: the count goal fills the new brokers with
    their share of small replicas, and the traffic goals can then lift one of them to only a third
    of the cluster's network_in, far under the goal's floor (0.80 of it at 1.10). Its balance figure
    (the hottest broker) reads balanced and it copies less than the default order's plan, which
    fills the new brokers. ``plan`` (``counts_first`` None) does not keep it: a traffic goal the
    first plan meets is not left outside its threshold for data (``_better``)."""
    snap = fleet_cluster(2)
    plain = plan(snap, PlannerOptions(counts_first=False))
    forced = plan(snap, PlannerOptions(counts_first=True))
    assert forced.bytes_to_move < plain.bytes_to_move
    assert forced.after["network_in"] <= 1.10
    assert _lowest_network_in(snap, forced) < 0.5
    assert _lowest_network_in(snap, plain) >= 0.8
    options = PlannerOptions(counts_first=None)
    chosen = plan(snap, options)
    assert _lowest_network_in(snap, chosen) >= 0.8
    assert chosen.bytes_to_move == plain.bytes_to_move
    # The benchmark's verdict names the floor the forced plan misses, with the same figure.
    floors = missed_floors(snap, plan_outcome(snap, forced, options), options)
    assert floors["network_in"] == pytest.approx(_lowest_network_in(snap, forced))


def test_a_first_plan_near_its_data_bound_still_tries_the_count_goal_first_where_it_leaves_the_count_unmet(
    monkeypatch,
):
    """Near the least data its levels need (``_near_least``), the first plan leaves the other starts
    little data to save and none is tried; but its levels leave fleet cluster 15's replica count
    unmet, and the count goal first reaches other levels: that start runs and its plan is kept."""
    snap = fleet_cluster(15)
    monkeypatch.setattr(balancer.planner, "_near_least", lambda *args: True)
    assert not _count_met(plan(snap, PlannerOptions(counts_first=False)))
    chosen = plan(snap, PlannerOptions())
    assert check_plan(snap, chosen) == []
    assert _count_met(chosen)


def test_a_second_plan_may_leave_disk_between_its_target_and_its_threshold_where_rates_may_not():
    """Fleet cluster 9: the count goal first meets the replica count the goals' own order leaves
    unmet, for less data, and leaves disk a hair over the band the disk goal optimizes to (within
    its threshold), where the first plan keeps inside it. For a rate that is the noise margin a
    replan needs and the plan would not be kept (``_better``); disk is log sizes, re-measured
    without that noise, so it is."""
    snap = fleet_cluster(9)
    first = plan(snap, PlannerOptions(counts_first=False))
    chosen = plan(snap, PlannerOptions())
    assert check_plan(snap, chosen) == []
    assert _count_met(chosen) and not _count_met(first)
    assert chosen.bytes_to_move < first.bytes_to_move
    assert first.after["disk"] <= 1.09 < chosen.after["disk"] <= 1.10
