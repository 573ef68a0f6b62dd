"""The sink's plan tracking without Spark: the walk over a batch's windows, the outcome figures, the rows."""

from __future__ import annotations

import pytest

from balancer.config import load_config
from balancer.execution.lifecycle import Observed, PlanState
from balancer.planner.actions import Action
from balancer.spark.track import tracking

MIN = 60_000
W = 5 * MIN
ACTIONS = (
    Action("leadership", "t", 0, (1, 2), (2, 1), 1, 2, 0),
    Action("replica_move", "t", 1, (1, 2), (3, 2), 1, 3, 10),
)
BEFORE = {("t", 0): Observed((1, 2), 1), ("t", 1): Observed((1, 2), 1)}
AFTER = {("t", 0): Observed((2, 1), 2), ("t", 1): Observed((3, 2), 3)}
CONFIG = load_config(None, ["executor.proposal_ttl=10 minutes", "balancer.min_plan_interval=5 minutes"])


def info(plan_id: str, end_ms: int, status: str = "proposed", actions=ACTIONS) -> tracking.PlanInfo:
    figures = {r: 1.0 for r in tracking.RESOURCES}
    return tracking.PlanInfo(plan_id, "c", end_ms - W, end_ms, status, tuple(actions), figures, figures)


def test_windows_closing_together_are_settled_in_window_order():
    windows = [("c", k * W - W, k * W) for k in (1, 2, 3, 4)]
    results = {
        ("c", W): info("p1", W),
        ("c", 2 * W): info("p2", 2 * W),
        ("c", 3 * W): info("p3", 3 * W),
        ("c", 4 * W): info("p4", 4 * W),
    }
    observed = {("c", 2 * W): BEFORE, ("c", 3 * W): AFTER, ("c", 4 * W): AFTER}
    waiting, tracks = tracking.walk({}, windows, observed, CONFIG, results)
    # p1 holds the cluster: p2 (nothing done yet) waits; p1 completes in window 3, which waits
    # min_plan_interval; window 4 is the outcome window and may be planned.
    assert sorted(waiting) == [("c", 2 * W), ("c", 3 * W)]
    assert "p1 is proposed" in waiting[("c", 2 * W)] and "p1 completed" in waiting[("c", 3 * W)]
    (track,) = tracks
    assert [(e.plan_id, e.status, e.window_ms) for e in track.events] == [("p1", "completed", 3 * W)]
    assert [(o.plan_id, o.window_ms) for o in track.outcomes] == [("p1", 4 * W)]
    assert track.state.plan_id == "p4"


def test_before_planning_only_earlier_plans_hold_windows():
    latest = {"c": tracking.Latest(info("p0", 0), PlanState("p0", "c", 0, 2), False)}
    windows = [("c", 0, W), ("c", W, 2 * W), ("c", 2 * W, 3 * W)]
    waiting, _ = tracking.walk(latest, windows, {}, CONFIG)
    assert sorted(waiting) == [("c", W)]  # p0 expires at 2W (TTL 10 minutes): later windows may be planned


def test_relative_figures_are_utilization_over_the_clusters():
    loads = {
        1: {"network_in": 30.0, "network_out": 10.0, "disk": 0.0},
        2: {"network_in": 10.0, "network_out": 10.0},
    }
    capacity = {b: {r: 100.0 for r in tracking.RESOURCES} for b in (1, 2, 3)}
    figures = tracking._relative(loads, capacity)
    # network_in: 40 of 300 in the cluster; broker 1 at 30/100 is 2.25 times that.
    assert figures["network_in"] == pytest.approx({1: 2.25, 2: 0.75, 3: 0.0}, rel=1e-12)
    assert figures["disk"] == {1: 1.0, 2: 1.0, 3: 1.0}  # an idle resource is balanced, as the planner has it


def test_rows_as_arrow_in_the_tables_schema():
    rows = tracking.event_rows(
        [
            type(
                "T",
                (),
                {
                    "events": [
                        PlanState(
                            "p", "c", 0, 2, status="executing", window_ms=W, actions_done=1, bytes_done=0
                        )
                    ]
                },
            )()
        ]
    )
    table = tracking.arrow("plan_events", rows)
    assert table.num_rows == 1 and table.column("window_end")[0].as_py().timestamp() * 1000 == W
    assert table.column("status").to_pylist() == ["executing"]
