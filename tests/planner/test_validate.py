"""The independent plan checker catches what a broken planner could produce."""

from __future__ import annotations

import dataclasses

from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.planner import Action, plan
from balancer.planner.validate import check_plan


def _with(result, *actions):
    return dataclasses.replace(result, actions=tuple(actions))


def test_checker_flags_bad_actions():
    snap = generate(ScenarioSpec(brokers=6, racks=3, topics=4, seed=1))
    result = plan(snap)
    p = snap["partitions"][0]
    old = tuple(p["replicas"])
    same_rack = next(b for b in range(6) if b not in old and b % 3 == old[1] % 3)
    bad = [
        Action("replica_move", "nope", 0, old, (old[0], old[1], 99), old[0], old[0], 1),
        Action(
            "replica_move", p["topic"], p["partition"], old, (old[0], old[1], same_rack), old[0], old[0], 1
        ),
        Action("replica_move", p["topic"], p["partition"], (9, 8, 7), (9, 8, 6), 9, 9, 1),
    ]
    problems = check_plan(snap, _with(result, *bad))
    assert any("not a partition" in m for m in problems)
    assert any("rack awareness worsened" in m for m in problems)
    assert any("not the snapshot's" in m for m in problems)
    assert any("more than one action" in m for m in problems)


def test_checker_passes_a_real_plan():
    snap = generate(ScenarioSpec(brokers=6, racks=3, topics=10, new_empty_brokers=2, seed=2))
    assert check_plan(snap, plan(snap)) == []
