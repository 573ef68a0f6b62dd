"""The second plan from the relaxation's placement (planner.relaxation): kept only where it copies
less data and leaves no goal worse; its moves respect the hard goals."""

from __future__ import annotations

import dataclasses
import itertools
import os
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from planner_bench import SCENARIOS, heldout_clusters, missed_goals

import balancer.planner
from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.planner import ClusterModel, Plan, PlannerOptions, default_goals, plan, relaxation
from balancer.planner import _better as better
from balancer.planner import _choose as choose
from balancer.planner.actions import Move
from balancer.planner.goals import BOUND_TOLERANCE
from balancer.planner.model import REPLICA_MOVE
from balancer.planner.relaxation import data_bound, placement_moves
from balancer.planner.validate import check_plan


def heldout(seed: int, k: int) -> dict:
    _, _, _, snap = next(itertools.islice(heldout_clusters(k + 1, seed), k, None))
    return snap


def test_the_relaxed_plan_is_kept_where_the_search_copies_far_more_data_than_needed():
    # A held-out cluster (seed 314, #30) where the goals' search fills receivers with small
    # replicas that leave the replica count goal no move; from the relaxation's placement the goals
    # reach every target and the count goal's band with about an eighth less data (the count goal's
    # moves are its price: ``_better``).
    snap = heldout(314, 30)
    searched = plan(snap, PlannerOptions(relax=False, counts_first=False))
    relaxed = plan(snap, PlannerOptions(counts_first=False))
    assert (
        plan(snap, PlannerOptions(counts_first=False)).actions == relaxed.actions
    )  # the solve is deterministic
    assert check_plan(snap, relaxed) == []
    assert relaxed.bytes_to_move < 0.92 * searched.bytes_to_move
    assert missed_goals(relaxed, PlannerOptions()) == {}
    assert relaxed.unmet_goals == searched.unmet_goals
    within = {r.goal for r in relaxed.goals if r.within_threshold}
    assert "replicas_distribution" in within - {r.goal for r in searched.goals if r.within_threshold}


def test_a_relaxed_plan_copies_no_more_and_leaves_no_goal_worse():
    # Seed 99's first six held-out clusters: #4 is one where a second plan lowers the disk goal's
    # metric (a sum of distances outside the band) while raising the disk figure (the hottest broker).
    for k, (_, _, _, snap) in enumerate(heldout_clusters(6, 99)):
        searched = plan(snap, PlannerOptions(relax=False, swap_data_cap=False))
        relaxed = plan(snap, PlannerOptions(swap_data_cap=False))
        assert check_plan(snap, relaxed) == [], k
        assert relaxed.bytes_to_move <= searched.bytes_to_move, k
        assert set(relaxed.unmet_goals) <= set(searched.unmet_goals), k
        for r in ("network_in", "network_out", "disk"):
            met = max(PlannerOptions().threshold(r), (1 + BOUND_TOLERANCE) * searched.lower_bound[r])
            assert relaxed.after[r] <= max(searched.after[r], met) + 1e-9, (k, r)


def test_a_second_plan_is_judged_by_what_the_goals_count_as_met():
    # balancer.planner._better on one real plan with its figures and goal reports replaced.
    options = PlannerOptions()
    goals = default_goals(options)
    base = plan(generate(ScenarioSpec(brokers=4, racks=0, topics=6, seed=7)), options)
    reports = {r.goal: r for r in base.goals}

    def variant(
        data: int, network_out: float, moves: int = 10, within: tuple[str, ...] = (), **distance: float
    ) -> Plan:
        # ``within``: goals left outside the band they optimize into, yet within their thresholds.
        after = dict(base.after, network_out=network_out)
        changed = tuple(
            dataclasses.replace(
                reports[g.name],
                after=distance.get(g.name, 0.0),
                within_threshold=g.name not in distance or g.name in within,
            )
            for g in goals
        )
        bound = dict(base.lower_bound, network_out=1.45)
        return dataclasses.replace(
            base, bytes_to_move=data, after=after, goals=changed, lower_bound=bound, replica_moves=moves
        )

    searched = variant(100, 1.45, replicas_distribution=2716.0)
    # A figure within BOUND_TOLERANCE of its bound is met, as the goals count it; a count goal
    # the first plan leaves outside its band too is not compared.
    assert better(variant(70, 1.464, replicas_distribution=3345.0), searched, options, goals)
    # Past the bound's tolerance, the figure is worse.
    assert not better(variant(70, 1.48), searched, options, goals)
    # A count goal the first plan meets, left outside its band: worse.
    assert not better(variant(70, 1.45, leaders_distribution=3.0), searched, options, goals)
    # Any other goal further outside its limits: worse.
    assert not better(variant(70, 1.45, leader_bytes_in_distribution=0.5), searched, options, goals)
    assert not better(variant(100, 1.45), searched, options, goals)  # no less data
    # A soft goal left a hair outside the band it optimizes into, within its threshold (it would
    # propose nothing there): met. A hard goal further outside its limits is worse whatever it says.
    lbin = "leader_bytes_in_distribution"
    assert better(variant(70, 1.45, within=(lbin,), **{lbin: 7e-5}), searched, options, goals)
    hard = next(g.name for g in goals if g.hard)
    assert not better(variant(70, 1.45, within=(hard,), **{hard: 7e-5}), searched, options, goals)


def test_a_second_plan_with_more_moves_must_save_data_in_proportion_to_the_moves_it_adds():
    # balancer.planner._better: data first, moves second. The first plan copies 100 bytes in 10
    # replica moves; the data slack is 20%.
    options = PlannerOptions(data_slack=0.2)
    goals = default_goals(options)
    searched = plan(generate(ScenarioSpec(brokers=4, racks=0, topics=6, seed=7)), options)

    def variant(data: int, moves: int) -> Plan:
        return dataclasses.replace(searched, bytes_to_move=data, replica_moves=moves)

    first = variant(100, 10)
    assert better(variant(99, 10), first, options, goals)  # as many moves: any saving
    assert better(variant(99, 9), first, options, goals)
    # One move more (a tenth): a tenth of the slack, 2% less data.
    assert better(variant(97, 11), first, options, goals)
    assert not better(variant(99, 11), first, options, goals)
    # Twice as many moves or more: the whole slack.
    assert not better(variant(85, 20), first, options, goals)
    assert not better(variant(85, 200), first, options, goals)
    assert better(variant(80, 200), first, options, goals)


def test_the_moves_a_goal_needs_are_not_charged_against_the_data():
    # balancer.planner._better: a plan that brings a goal within its threshold that the first plan
    # leaves outside (the replica count's band on new brokers, hundreds of moves) is kept for any
    # saving of data, however many moves it adds; where both leave it outside, the moves count.
    options = PlannerOptions(data_slack=0.2)
    goals = default_goals(options)
    searched = plan(generate(ScenarioSpec(brokers=4, racks=0, topics=6, seed=7)), options)
    counts = next(i for i, g in enumerate(goals) if g.name == "replicas_distribution")

    def variant(data: int, moves: int, counts_within: bool) -> Plan:
        reports = list(searched.goals)
        reports[counts] = dataclasses.replace(
            reports[counts], after=0.0 if counts_within else 300.0, within_threshold=counts_within
        )
        return dataclasses.replace(searched, bytes_to_move=data, replica_moves=moves, goals=tuple(reports))

    first = variant(100, 10, counts_within=False)
    assert better(variant(99, 200, counts_within=True), first, options, goals)
    assert not better(variant(99, 200, counts_within=False), first, options, goals)
    assert not better(variant(100, 200, counts_within=True), first, options, goals)  # no less data


def test_the_plan_kept_is_the_same_whatever_order_the_starts_come_in():
    # balancer.planner._choose on one real plan with its network out figure and data replaced. The
    # first search's plan copies 100 and leaves network out at 1.55, over its threshold and its
    # bound's tolerance (1.45 x 1.02). Three other starts are better than it: "cool" copies 80 and
    # meets the figure; "hot" copies 60 and leaves it at 1.52; "beaten" copies 90 and meets it.
    # Judged each against the best so far, "cool" after "hot" is not kept (more data) and "hot"
    # after "cool" is not (hotter): the order decides. Judged all against all, "beaten" is out
    # ("cool" is better than it) and "cool" is kept over "hot" (no worse goal, more data).
    options = PlannerOptions()
    goals = default_goals(options)
    base = plan(generate(ScenarioSpec(brokers=4, racks=0, topics=6, seed=7)), options)

    def variant(data: int, network_out: float) -> Plan:
        after = dict(base.after, network_out=network_out)
        bound = dict(base.lower_bound, network_out=1.45)
        return dataclasses.replace(base, bytes_to_move=data, after=after, lower_bound=bound, replica_moves=10)

    searched = variant(100, 1.55)
    starts = {"cool": variant(80, 1.47), "hot": variant(60, 1.52), "beaten": variant(90, 1.47)}

    def best_so_far(order: tuple[str, ...]) -> str:
        best, name = searched, "searched"
        for n in order:
            if better(starts[n], best, options, goals):
                best, name = starts[n], n
        return name

    orders = list(itertools.permutations(starts))
    assert {best_so_far(o) for o in orders} == {"cool", "hot"}
    for order in orders:
        assert choose(searched, [starts[n] for n in order], options, goals) is starts["cool"], order
    assert choose(searched, [], options, goals) is searched
    # A plan no better than the first search's is never kept, however little it copies.
    assert choose(searched, [variant(10, 1.60)], options, goals) is searched


def test_the_relaxed_placement_moves_less_data_than_the_search():
    # The relaxation's rounded placement, before the goals run from it.
    snap = heldout(11, 12)
    options = PlannerOptions(relax=False)
    searched = plan(snap, options)
    model = ClusterModel(snap, options)
    goals = default_goals(options)
    levels = ClusterModel(
        {**snap, "partitions": [_after(p, searched) for p in snap["partitions"]]}, options
    ).load
    moves = placement_moves(model, levels, goals)
    assert moves
    copied = sum(float(model.size[m.p]) for m in moves)
    assert copied < 0.85 * searched.bytes_to_move


def test_a_plan_within_the_data_slack_of_the_bound_is_not_planned_again(monkeypatch):
    # Held-out seed 1001 #2 is planned at 1.07x its data bound: no second plan could be kept (it
    # would need 20% less data), so none is made; seed 42 #15, at 1.40x, gets one.
    calls = []
    real = balancer.planner.relax

    def spy(*args, exact):
        calls.append(exact)
        return real(*args, exact=exact)

    monkeypatch.setattr(balancer.planner, "relax", spy)
    plan(heldout(1001, 2), PlannerOptions(counts_first=False))
    assert calls == []
    plan(heldout(42, 15), PlannerOptions(swap_data_cap=False, fill_disk_excess=False, counts_first=False))
    assert calls == [False, True]  # the relaxation, then the exact one


def test_the_search_runs_again_with_capped_swaps_only_where_the_first_made_a_swap_over_the_cap(monkeypatch):
    # The second search (traffic swaps capped) is made only where the first plan is not near the
    # least (seed 1001 #2 is) and made a traffic swap the cap refuses: seed 42 #15 made none,
    # seed 77 #13 exchanged two giants.
    caps = []
    real = balancer.planner._search

    def spy(snapshot, goals, options, *args, **kwargs):
        if kwargs.get("levels") is None and not options.fill_disk_excess:  # not the disk-excess fill's
            caps.append(options.swap_data_cap)
        return real(snapshot, goals, options, *args, **kwargs)

    monkeypatch.setattr(balancer.planner, "_search", spy)
    plan(heldout(1001, 2), PlannerOptions(counts_first=False))
    assert caps == [False]
    caps.clear()
    plan(heldout(42, 15), PlannerOptions(counts_first=False))
    assert caps == [False]
    caps.clear()
    plan(heldout(77, 13), PlannerOptions(counts_first=False))
    assert caps == [False, True]


def test_capped_traffic_swaps_keep_two_giants_from_trading_places():
    # Held-out seed 77 #13 (12 brokers, RF 2, sizes following traffic, disks of several sizes):
    # uncapped, the network_in goal exchanges giants of one topic between two brokers for the
    # small difference of their traffic, a sixth of all data for two swaps. Capped, the same
    # figures come from plain moves at under half the data; plan keeps that plan.
    snap = heldout(77, 13)
    uncapped = plan(snap, PlannerOptions(swap_data_cap=False))
    kept = plan(snap, PlannerOptions())
    assert check_plan(snap, kept) == []
    assert kept.bytes_to_move < 0.6 * uncapped.bytes_to_move
    assert better(kept, uncapped, PlannerOptions(), default_goals(PlannerOptions()))
    assert set(kept.unmet_goals) <= set(uncapped.unmet_goals)


def test_the_data_bound_is_no_more_than_the_plan_it_is_measured_from():
    for k, (_, _, _, snap) in enumerate(heldout_clusters(5, 5)):
        options = PlannerOptions(relax=False)
        searched = plan(snap, options)
        levels = ClusterModel(
            {**snap, "partitions": [_after(p, searched) for p in snap["partitions"]]}, options
        ).load
        bound = data_bound(ClusterModel(snap, options), levels, default_goals(options))
        assert 0 <= bound <= searched.bytes_to_move * (1 + 1e-9), k


def test_swap_data_cap_must_be_none_or_a_bool():
    with pytest.raises(ValueError, match="swap_data_cap"):
        PlannerOptions(swap_data_cap="yes")


def test_relax_must_be_a_bool():
    with pytest.raises(ValueError, match="relax"):
        PlannerOptions(relax="yes")


def _after(p: dict, result) -> dict:
    for a in result.actions:
        if (a.topic, a.partition) == (p["topic"], p["partition"]):
            return {**p, "replicas": list(a.new_replicas), "leader": a.new_leader}
    return p


def test_a_leader_moved_away_hands_its_leadership_to_the_first_replica_that_can_take_it(monkeypatch):
    # Partition 0's leader replica moves from broker 0 to broker 3; leading it sends 50 out (40 to
    # consumers, 5 to each follower). Broker 1 leads the fewest but has network-out room for 40 only
    # (80% of 50); broker 2 has room: it takes the leadership, and the replica moves as a follower
    # (broker 3 has no room to lead it either).
    caps = {1: 50.0, 3: 50.0}
    snap = {
        "cluster": "t",
        "brokers": [
            {
                "id": b,
                "rack": "abcd"[b],
                "capacity": {"network_in": 100.0, "network_out": caps.get(b, 100.0), "disk": 1000.0},
            }
            for b in range(4)
        ],
        "partitions": [
            {
                "topic": "t",
                "partition": 0,
                "replicas": [0, 1, 2],
                "leader": 0,
                "bytes_in": 5.0,
                "bytes_out": 40.0,
                "size": 1.0,
            },
            {
                "topic": "t",
                "partition": 1,
                "replicas": [2, 3],
                "leader": 2,
                "bytes_in": 1.0,
                "bytes_out": 10.0,
                "size": 1.0,
            },
        ],
    }
    options = PlannerOptions(capacity_threshold=0.8)
    model = ClusterModel(snap, options)
    goals = default_goals(options)
    for goal in goals:
        goal.reset()
    monkeypatch.setattr(relaxation, "placement_moves", lambda *_, **__: [Move(REPLICA_MOVE, 0, 0, 3)])
    assert relaxation.relax(model, model.load, goals) == 1
    assert int(model.leader[0]) == 2
    assert sorted(model.replicas[0].tolist()) == [1, 2, 3]


def test_a_cluster_too_large_for_the_solve_is_neither_measured_nor_planned_again(monkeypatch):
    # Seed 42 #15 gets a second plan (above); with the size limit under its variables, its first plan
    # is returned without the data bound's model or a solve: on a fleet-scale cluster those would cost
    # more than the plan.
    calls = []
    monkeypatch.setattr(balancer.planner, "relax", lambda *a, **k: calls.append("relax"))
    monkeypatch.setattr(balancer.planner, "data_bound", lambda *a: calls.append("bound") or 0.0)
    monkeypatch.setattr(relaxation, "MAX_VARIABLES", 1000)
    searched = plan(heldout(42, 15), PlannerOptions(fill_disk_excess=False))  # a search start, no solve
    assert searched.replica_moves > 0
    assert calls == []


def test_a_fleet_cluster_is_planned_by_the_search_alone(monkeypatch):
    # One of the fleet benchmark's clusters (the planner benchmark's fleet_scale_out: 6,656
    # partitions at RF 3 over 26 brokers, two of them new and empty): its first plan is not within
    # the data slack of the bound, but its relaxation is past the size limit (a solve there costs
    # minutes, the search a fraction of a second), so the first plan is the answer, neither
    # measured nor solved again. (The fills drawing on the disk excess are a second search: held
    # out here, they measure the plan to know whether it could gain.)
    snap = generate(ScenarioSpec(**SCENARIOS["fleet_scale_out"]))
    options = PlannerOptions(fill_disk_excess=False)
    assert not relaxation.fits(ClusterModel(snap, options))
    calls = []
    monkeypatch.setattr(balancer.planner, "relax", lambda *a, **k: calls.append("relax"))
    monkeypatch.setattr(balancer.planner, "data_bound", lambda *a: calls.append("bound") or 0.0)
    searched = plan(snap, options)
    assert searched.replica_moves > 0
    assert calls == []


def test_each_start_is_judged_against_all_the_others(monkeypatch):
    # Held-out seed 2718 #26 (15 brokers, disks too full for the capacity goal): the capped search
    # copies the least data but leaves network in and out hotter than the relaxed start of the
    # uncapped one. Judged each against the best so far, the order the starts come in decides which
    # is kept; judged all against all, the same plan is kept in every order, none hotter.
    snap = heldout(2718, 26)
    calls = []
    real = balancer.planner._choose
    monkeypatch.setattr(balancer.planner, "_choose", lambda *a: calls.append(a) or real(*a))
    uncapped = plan(snap, PlannerOptions(swap_data_cap=False))
    kept = plan(snap, PlannerOptions())
    assert check_plan(snap, kept) == []
    for r in ("network_in", "network_out", "disk"):
        assert kept.after[r] <= uncapped.after[r] + 1e-9, r
    assert kept.bytes_to_move <= uncapped.bytes_to_move
    searched, others, options, goals = calls[-1]

    def best_so_far(order: tuple[Plan, ...]) -> Plan:
        best = searched
        for p in order:
            if better(p, best, options, goals):
                best = p
        return best

    orders = list(itertools.permutations(others))
    assert len({best_so_far(o).bytes_to_move for o in orders}) > 1
    for order in orders:
        assert real(searched, list(order), options, goals).actions == kept.actions


def test_the_exact_relaxation_applies_a_move_refused_while_its_destination_was_full(monkeypatch):
    # Partition 0 (40 in) moves onto broker 3, which holds partition 1 (50 in): over the 80 the
    # capacity goal allows until partition 1 has left for broker 1. The placement lists broker 3's
    # arrival first; one pass applies only the departure, the exact relaxation's passes both.
    snap = {
        "cluster": "t",
        "brokers": [
            {"id": b, "rack": "abcd"[b], "capacity": {"network_in": 100.0, "network_out": 100.0, "disk": 1e3}}
            for b in range(4)
        ],
        "partitions": [
            {"topic": "t", "partition": p, "replicas": [b], "leader": b, "bytes_in": i, "bytes_out": 1.0}
            | {"size": 1.0}
            for p, b, i in ((0, 0, 40.0), (1, 3, 50.0))
        ],
    }
    options = PlannerOptions(capacity_threshold=0.8)
    moves = [Move(REPLICA_MOVE, 0, 0, 3), Move(REPLICA_MOVE, 1, 3, 1)]
    monkeypatch.setattr(relaxation, "placement_moves", lambda *_, **__: list(moves))
    for exact, applied in ((False, 1), (True, 2)):
        model = ClusterModel(snap, options)
        goals = default_goals(options)
        for goal in goals:
            goal.reset()
        assert relaxation.relax(model, model.load, goals, exact=exact) == applied, exact
    assert sorted(model.replicas[:, 0].tolist()) == [1, 3]


def test_the_solvers_stray_output_goes_to_stderr_not_the_console(capfd):
    # HiGHS's MIP solver can print a line to fd 1 whatever its display option says; while it
    # solves, fd 1 is fd 2 (the log file under Spark), and the console's stdout is restored after.
    with relaxation._stdout_to_stderr():
        os.write(1, b"from the solver\n")
    os.write(1, b"after\n")
    out, err = capfd.readouterr()
    assert out == "after\n"
    assert err == "from the solver\n"


def test_two_threads_solving_at_once_leave_stdout_on_the_console(capfd):
    # The fd swap is process-wide: thread B entering while A is inside would save A's swapped fd 1
    # and, leaving after A restored the console's, put the swapped one back for good.
    inside, a_go, b_go = threading.Event(), threading.Event(), threading.Event()

    def first():
        with relaxation._stdout_to_stderr():
            inside.set()
            a_go.wait(10)

    def second():
        with relaxation._stdout_to_stderr():
            b_go.wait(10)

    a = threading.Thread(target=first)
    a.start()
    assert inside.wait(10)
    b = threading.Thread(target=second)
    b.start()
    b.join(0.2)  # unguarded, B is inside by now; guarded, it waits for A
    a_go.set()
    a.join(10)
    b_go.set()
    b.join(10)
    os.write(1, b"after\n")
    out, _ = capfd.readouterr()
    assert out == "after\n"


def test_the_exact_relaxation_is_kept_where_it_copies_less_in_fewer_moves(monkeypatch):
    # Held-out seed 1001 #36: the goals finishing from the rounded placement copy about 8% more data,
    # in more replica moves, than from the exact placement (split giants decided as integers), and
    # plan keeps the exact one. (The case is chosen for its margin: which vertex the solver returns,
    # and so a plan's last bytes, can differ between CPUs; a saving of a fraction of a percent, as
    # seed 314 #28 had, flips.)
    snap = heldout(1001, 36)
    kept = plan(snap, PlannerOptions())
    real = balancer.planner.relax
    monkeypatch.setattr(balancer.planner, "relax", lambda *a, exact: 0 if exact else real(*a, exact=False))
    rounded = plan(snap, PlannerOptions())
    assert check_plan(snap, kept) == []
    assert kept.bytes_to_move < 0.95 * rounded.bytes_to_move
    assert kept.replica_moves < rounded.replica_moves
    assert better(kept, rounded, PlannerOptions(), default_goals(PlannerOptions()))


def test_each_goal_report_says_whether_the_goal_would_act_on_the_plans_placement():
    # Plan.goals[i].within_threshold (what balancer.planner._better reads for a soft goal) is the
    # goal's own trigger check on the placement the plan leaves. Held-out seed 1001 #13: its disks
    # cannot all go under the capacity threshold, so some goals are left outside and some within.
    snap, options = heldout(1001, 13), PlannerOptions(relax=False)
    result = plan(snap, options)
    placed = ClusterModel({**snap, "partitions": [_after(p, result) for p in snap["partitions"]]}, options)
    goals = default_goals(options)
    expected = [not g.violated(placed) for g in goals]
    assert [r.within_threshold for r in result.goals] == expected
    assert set(expected) == {True, False}
