"""Golden files: snapshot -> reassignment + election JSON, byte for byte.

A change to the search shows up here as a diff to review. After an intended change, rewrite
the expected files with ``.venv/bin/python tests/planner/test_golden.py`` and read the diff.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.planner import PlannerOptions, plan
from balancer.planner.validate import check_plan

GOLDEN = Path(__file__).parent / "golden"
CASES = {
    "scale_out": (
        ScenarioSpec(brokers=6, racks=3, topics=8, partitions_per_topic=(3, 9), new_empty_brokers=2, seed=21),
        {},
    ),
    "restarted": (
        ScenarioSpec(
            brokers=5, racks=0, topics=8, partitions_per_topic=(3, 9), skew=0.0, restarted_broker=3, seed=22
        ),
        {},
    ),
    "hetero_capped": (
        ScenarioSpec(
            brokers=6, racks=2, topics=10, partitions_per_topic=(2, 8), heterogeneous_capacity=True, seed=23
        ),
        {"max_moves_per_broker": 3, "excluded_topics": "topic-000[01]", "excluded_brokers": (5,)},
    ),
}


def _dump(payload) -> str:
    return json.dumps(payload, indent=1, sort_keys=True) + "\n"


def _planned(name: str, snapshot: dict) -> dict:
    _, opts = CASES[name]
    result = plan(snapshot, PlannerOptions(**opts))
    assert check_plan(snapshot, result) == []
    return {
        "reassignment": result.to_reassignment(),
        "election": result.to_election(),
        "after": {k: round(v, 6) for k, v in result.after.items()},
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name):
    snapshot = json.loads((GOLDEN / f"{name}.snapshot.json").read_text())  # the input, not the generator
    expected = (GOLDEN / f"{name}.plan.json").read_text()
    assert _dump(_planned(name, snapshot)) == expected


def update_golden() -> int:
    """Rewrite every snapshot and plan file; print which plans changed (the diff is what to review)."""
    GOLDEN.mkdir(exist_ok=True)
    for name, (spec, _) in sorted(CASES.items()):
        snap_file, plan_file = GOLDEN / f"{name}.snapshot.json", GOLDEN / f"{name}.plan.json"
        snap_file.write_text(_dump(generate(spec)))
        previous = plan_file.read_text() if plan_file.exists() else None
        new = _dump(_planned(name, json.loads(snap_file.read_text())))
        plan_file.write_text(new)
        print(f"{plan_file.name}: {'unchanged' if new == previous else 'CHANGED, review git diff'}")
    return 0


if __name__ == "__main__":
    sys.exit(update_golden())
