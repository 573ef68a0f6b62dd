"""The plan lifecycle read from observed topology (pure: balancer.execution.lifecycle)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.execution.lifecycle import (
    ClusterTrack,
    Observed,
    PlanState,
    action_state,
    advance,
    measure,
    supersede,
    waiting_reason,
)
from balancer.planner.actions import Action

MIN = 60_000
W = 5 * MIN
TTL = 3 * W


def lead(partition: int, old: tuple, new_leader: int) -> Action:
    new = (new_leader, *[b for b in old if b != new_leader])
    return Action("leadership", "t", partition, old, new, old[0], new_leader, 0)


def move(partition: int, old: tuple, new: tuple, size: int = 100) -> Action:
    return Action("replica_move", "t", partition, old, new, old[0], new[0], size * len(set(new) - set(old)))


ACTIONS = (lead(0, (1, 2), 2), move(1, (1, 2), (3, 2)), move(2, (2, 1), (2, 4)))


def before(actions=ACTIONS) -> dict:
    return {(a.topic, a.partition): Observed(a.old_replicas, a.old_leader) for a in actions}


def after(actions=ACTIONS) -> dict:
    return {(a.topic, a.partition): Observed(a.new_replicas, a.new_leader) for a in actions}


def state(**kw) -> PlanState:
    return PlanState("p1", "c", 0, len(ACTIONS), **kw)


def test_action_states_compare_sets_for_replicas_and_the_leader():
    a = move(1, (1, 2), (3, 2))
    assert action_state(a, Observed((3, 2), 3)) == "done"
    assert action_state(a, Observed((2, 3), 3)) == "done"  # order is not compared: the leader is
    assert action_state(a, Observed((3, 2), 2)) == "pending"  # moved, leader not yet transferred
    assert action_state(a, Observed((1, 2), 1)) == "pending"
    assert action_state(a, Observed((1, 2, 3), 1)) == "pending"  # Kafka's in-flight union of old and new
    assert action_state(a, Observed((1, 4), 1)) == "diverged"
    assert action_state(a, Observed((2,), 2)) == "diverged"  # a replica dropped, none added
    assert action_state(a, None) == "unobserved"
    leadership = lead(0, (1, 2), 2)
    assert action_state(leadership, Observed((1, 2), 2)) == "done"
    assert action_state(leadership, Observed((1, 2), 1)) == "pending"


def test_proposed_executing_completed_with_progress_counts():
    s0 = state()
    half = {**before(), **{k: v for k, v in after().items() if k[1] < 2}}
    s1 = advance(s0, ACTIONS, half, W, TTL)
    assert (s1.status, s1.actions_done, s1.bytes_done, s1.since_ms) == ("executing", 2, 100, W)
    s2 = advance(s1, ACTIONS, half, 2 * W, TTL)
    assert s2.key() == s1.key() and s2.since_ms == W  # no progress: no event
    s3 = advance(s2, ACTIONS, after(), 3 * W, TTL)
    assert (s3.status, s3.actions_done, s3.actions_total, s3.bytes_done) == ("completed", 3, 3, 200)
    assert advance(s3, ACTIONS, before(), 4 * W, TTL) is s3  # closed plans stay closed


def test_windows_not_after_the_plans_own_change_nothing():
    s0 = state()
    assert advance(s0, ACTIONS, after(), 0, TTL) is s0


def test_expiry_counts_from_the_last_progress():
    s0 = state()
    assert advance(s0, ACTIONS, before(), TTL - 1, TTL).status == "proposed"
    expired = advance(s0, ACTIONS, before(), TTL, TTL)
    assert expired.status == "expired" and "no action observed" in expired.detail
    s1 = advance(s0, ACTIONS, {**before(), ("t", 0): Observed((1, 2), 2)}, W, TTL)
    assert s1.status == "executing"
    assert (
        advance(s1, ACTIONS, {**before(), ("t", 0): Observed((1, 2), 2)}, W + TTL - 1, TTL).status
        == "executing"
    )
    stalled = advance(s1, ACTIONS, {**before(), ("t", 0): Observed((1, 2), 2)}, W + TTL, TTL)
    assert stalled.status == "expired" and stalled.actions_done == 1 and "no progress since" in stalled.detail


def test_a_partition_moved_elsewhere_diverges_the_plan():
    moved = {**before(), ("t", 1): Observed((1, 5), 1)}
    s = advance(state(), ACTIONS, moved, W, TTL)
    assert s.status == "diverged" and "t-1 on [1, 5]" in s.detail and s.since_ms == W


def test_silence_is_neither_progress_nor_divergence():
    s = advance(state(), ACTIONS, {}, W, TTL)
    assert s.status == "proposed" and s.actions_done == 0
    p = measure(ACTIONS, {("t", 0): Observed((2, 1), 2)})
    assert (p.actions_done, p.unobserved, p.diverged) == (1, 2, ())


def test_supersede_only_a_plan_nothing_of_which_was_observed():
    s0 = state()
    expired = advance(s0, ACTIONS, before(), TTL, TTL)
    assert supersede(s0, expired, "p2").status == "superseded"
    s1 = advance(s0, ACTIONS, {**before(), ("t", 0): Observed((1, 2), 2)}, W, TTL)
    stalled = advance(s1, ACTIONS, {**before(), ("t", 0): Observed((1, 2), 2)}, W + TTL, TTL)
    assert supersede(s1, stalled, "p2").status == "expired"
    assert supersede(s0, s0, "p2") is s0


def test_waiting_reasons():
    assert waiting_reason(None, W, W) is None
    assert "plan p1 is proposed (0/3" in waiting_reason(state(), W, W)
    done = state(status="completed", since_ms=W, actions_done=3)
    assert "plan p1 completed" in waiting_reason(done, 2 * W - 1, W)
    assert waiting_reason(done, 2 * W, W) is None
    assert waiting_reason(state(status="expired"), W, 10 * W) is None


def test_track_one_plan_at_a_time_in_window_order():
    """Windows 1..6 of one cluster; plans proposed whenever a window may be planned."""
    track = ClusterTrack("c", ttl_ms=TTL, min_interval_ms=2 * W)
    assert track.observe(0, W, before()) is None
    track.decide("p1", ACTIONS)
    # Window 2: nothing done yet: waiting on p1.
    assert "p1 is proposed" in track.observe(W, 2 * W, before())
    # Window 3: the leadership transfer is seen.
    partial = {**before(), ("t", 0): Observed((1, 2), 2)}
    assert "p1 is executing (1/3" in track.observe(2 * W, 3 * W, partial)
    # Window 4: all done: completed; waits min_plan_interval from here.
    assert "p1 completed" in track.observe(3 * W, 4 * W, after())
    # Window 5: the first full window after completion is the outcome window; still waiting.
    assert "p1 completed" in track.observe(4 * W, 5 * W, after())
    assert [(o.plan_id, o.plan_window_ms, o.window_ms) for o in track.outcomes] == [("p1", W, 5 * W)]
    # Window 6: may be planned.
    assert track.observe(5 * W, 6 * W, after()) is None
    assert [(e.status, e.actions_done, e.window_ms) for e in track.events] == [
        ("executing", 1, 3 * W),
        ("completed", 3, 4 * W),
    ]


def test_track_supersedes_an_untouched_plan_after_the_ttl():
    track = ClusterTrack("c", ttl_ms=TTL, min_interval_ms=W)
    track.observe(0, W, before())
    track.decide("p1", ACTIONS)
    for k in (2, 3):
        assert "p1 is proposed" in track.observe((k - 1) * W, k * W, before())
    assert track.observe(3 * W, 4 * W, before()) is None  # TTL passed: expired, the window may be planned
    track.decide("p2", ACTIONS)
    assert [(e.plan_id, e.status) for e in track.events] == [("p1", "superseded")]
    assert "replaced by plan p2" in track.events[0].detail
    assert "p2 is proposed" in track.observe(4 * W, 5 * W, before())


def test_track_expired_stays_expired_when_the_window_needs_no_plan():
    track = ClusterTrack("c", ttl_ms=TTL, min_interval_ms=W)
    track.observe(0, W, before())
    track.decide("p1", ACTIONS)
    for k in (2, 3, 4):
        track.observe((k - 1) * W, k * W, before())
    assert track.observe(4 * W, 5 * W, before()) is None
    track.decide("p2", ACTIONS)  # proposed one window after p1 expired: p1 stays expired
    assert [(e.plan_id, e.status) for e in track.events] == [("p1", "expired")]


def test_track_rejects_out_of_order_windows_and_a_second_open_plan():
    track = ClusterTrack("c", ttl_ms=TTL, min_interval_ms=W)
    track.observe(W, 2 * W, before())
    with pytest.raises(ValueError, match="in order"):
        track.observe(0, W, before())
    track.decide("p1", ACTIONS)
    track.observe(2 * W, 3 * W, before())
    with pytest.raises(ValueError, match="while plan p1 is proposed"):
        track.decide("p2", ACTIONS)


_partition_view = st.sampled_from(["old", "new", "union", "elsewhere", "silent", "new_wrong_leader"])


def _observed(action: Action, view: str) -> Observed | None:
    if view == "old":
        return Observed(action.old_replicas, action.old_leader)
    if view == "new":
        return Observed(tuple(reversed(action.new_replicas)), action.new_leader)
    if view == "new_wrong_leader":
        others = [b for b in action.new_replicas if b != action.new_leader]
        return Observed(action.new_replicas, others[0] if others else None)
    if view == "union":
        return Observed(tuple(dict.fromkeys(action.old_replicas + action.new_replicas)), action.old_leader)
    if view == "elsewhere":
        return Observed((99, *action.old_replicas[1:]), action.old_leader)
    return None


@st.composite
def plans(draw):
    n = draw(st.integers(1, 6))
    actions = []
    for p in range(n):
        old = tuple(draw(st.permutations(range(1, 5)))[:2])
        if draw(st.booleans()):
            actions.append(lead(p, old, old[1]))
        else:
            new = (draw(st.sampled_from([b for b in range(1, 7) if b not in old])), old[1])
            actions.append(move(p, old, new, draw(st.integers(0, 1000))))
    views = draw(st.lists(_partition_view, min_size=n, max_size=n))
    return actions, views


@settings(max_examples=200, deadline=None)
@given(plans())
def test_progress_is_counted_per_action_and_status_follows_it(drawn):
    actions, views = drawn
    topology = {
        (a.topic, a.partition): o for a, v in zip(actions, views) if (o := _observed(a, v)) is not None
    }
    # A leadership action's "union" and "elsewhere" views: old set; "new" with the new leader: done.
    expected_done = [a for a, v in zip(actions, views) if v == "new"]
    expected_diverged = [a for a, v in zip(actions, views) if v == "elsewhere"]
    progress = measure(actions, topology)
    assert progress.actions_done == len(expected_done)
    assert progress.bytes_done == sum(a.bytes_to_move for a in expected_done)
    assert len(progress.diverged) == len(expected_diverged)
    assert progress.unobserved == views.count("silent")
    s = advance(PlanState("p", "c", 0, len(actions)), actions, topology, W, TTL)
    if expected_diverged:
        assert s.status == "diverged"
    elif len(expected_done) == len(actions):
        assert s.status == "completed"
    elif expected_done:
        assert s.status == "executing"
    else:
        assert s.status == "proposed"
    assert 0 <= s.actions_done <= s.actions_total == len(actions)
