"""The second plan from the relaxation's placement (planner.relaxation): kept only where it copies
less data and leaves no goal worse; its moves respect the hard goals."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from planner_bench import heldout_clusters, missed_goals

import balancer.planner
from balancer.planner import ClusterModel, PlannerOptions, default_goals, plan
from balancer.planner.relaxation import data_bound, placement_moves
from balancer.planner.validate import check_plan


def heldout(seed: int, k: int) -> dict:
    _, _, _, snap = next(itertools.islice(heldout_clusters(k + 1, seed), k, None))
    return snap


def test_the_relaxed_plan_is_kept_where_the_search_copies_far_more_data_than_needed():
    # A held-out cluster (seed 42, #15: 13 brokers, 5 racks, RF 4, mixed disks) where the goals'
    # search fills receivers that later goals shed again; from the relaxation's placement the
    # goals reach every target with a quarter less data.
    snap = heldout(42, 15)
    searched = plan(snap, PlannerOptions(relax=False))
    relaxed = plan(snap, PlannerOptions())
    assert check_plan(snap, relaxed) == []
    assert relaxed.bytes_to_move < 0.8 * searched.bytes_to_move
    assert missed_goals(relaxed, PlannerOptions()) == {}
    assert relaxed.unmet_goals == searched.unmet_goals


def test_a_relaxed_plan_copies_no_more_and_leaves_no_goal_worse():
    # Seed 99's first six held-out clusters: #4 is one where a second plan lowers the disk goal's
    # metric (a sum of distances outside the band) while raising the disk figure (the hottest broker).
    for k, (_, _, _, snap) in enumerate(heldout_clusters(6, 99)):
        searched = plan(snap, PlannerOptions(relax=False))
        relaxed = plan(snap, PlannerOptions())
        assert check_plan(snap, relaxed) == [], k
        assert relaxed.bytes_to_move <= searched.bytes_to_move, k
        assert set(relaxed.unmet_goals) <= set(searched.unmet_goals), k
        for r in ("network_in", "network_out", "disk"):
            assert relaxed.after[r] <= max(searched.after[r], PlannerOptions().threshold(r)) + 1e-9, (k, r)


def test_the_relaxed_placement_moves_less_data_than_the_search():
    # The relaxation's rounded placement, before the goals run from it.
    snap = heldout(42, 15)
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
    assert copied < 0.9 * searched.bytes_to_move


def test_a_plan_within_the_data_slack_of_the_bound_is_not_planned_again(monkeypatch):
    # Held-out seed 1001 #2 is planned at 1.07x its data bound: no second plan could be kept (it
    # would need 20% less data), so none is made; seed 42 #15, at 1.75x, gets one.
    calls = []
    real = balancer.planner.relax

    def spy(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(balancer.planner, "relax", spy)
    plan(heldout(1001, 2), PlannerOptions())
    assert calls == []
    plan(heldout(42, 15), PlannerOptions())
    assert calls == [1]


def test_the_data_bound_is_no_more_than_the_plan_it_is_measured_from():
    for k, (_, _, _, snap) in enumerate(heldout_clusters(5, 5)):
        options = PlannerOptions(relax=False)
        searched = plan(snap, options)
        levels = ClusterModel(
            {**snap, "partitions": [_after(p, searched) for p in snap["partitions"]]}, options
        ).load
        bound = data_bound(ClusterModel(snap, options), levels, default_goals(options))
        assert 0 <= bound <= searched.bytes_to_move * (1 + 1e-9), k


def test_relaxation_is_deterministic():
    snap = heldout(42, 15)
    first, second = plan(snap, PlannerOptions()), plan(snap, PlannerOptions())
    assert first.actions == second.actions


def test_relax_must_be_a_bool():
    with pytest.raises(ValueError, match="relax"):
        PlannerOptions(relax="yes")


def _after(p: dict, result) -> dict:
    for a in result.actions:
        if (a.topic, a.partition) == (p["topic"], p["partition"]):
            return {**p, "replicas": list(a.new_replicas), "leader": a.new_leader}
    return p
