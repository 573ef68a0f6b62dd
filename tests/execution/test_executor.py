"""The executor's pure rules: which replicas a batch throttles, which batches a dead run left open, when a
plan's rows are whole. (Their effect on a real cluster: test_execute_kafka.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from balancer.execution.executor import (
    ExecuteOptions,
    PartitionState,
    completed_batches,
    merged_replicas,
    open_batches,
    throttled_replicas,
)
from balancer.execution.records import ExecutionRecord, Outcome
from balancer.execution.store import PlanIncompleteError, check_whole

T = datetime(2026, 11, 25, 21, 0, tzinfo=UTC)


def test_throttled_replicas_follow_kafkas_rule_and_skip_a_reorder():
    current = {
        ("orders", 0): PartitionState((1, 2), 1),
        ("orders", 1): PartitionState((2, 3), 2),
        ("orders", 2): PartitionState((3, 1), 3),
    }
    targets = {("orders", 0): (3, 2), ("orders", 1): (3, 2), ("orders", 2): (1, 2)}
    assert throttled_replicas(targets, current) == {
        # partition 1 only reorders (same brokers): nothing to copy, nothing throttled
        "orders": (["0:1", "0:2", "2:3", "2:1"], ["0:3", "2:2"])
    }


def _record(batch: int, outcome: Outcome, minute: int) -> ExecutionRecord:
    return ExecutionRecord(
        plan_id="p",
        cluster="c",
        run_id=f"run-{minute}",
        batch=batch,
        outcome=outcome,
        recorded_at=T + timedelta(minutes=minute),
    )


def test_a_batch_is_open_only_while_started_is_its_latest_row():
    history = [
        _record(0, Outcome.STARTED, 0),
        _record(0, Outcome.COMPLETED, 1),
        _record(1, Outcome.STARTED, 2),  # the run died here
        _record(-1, Outcome.STOP_REQUESTED, 3),
        _record(2, Outcome.STARTED, 4),
        _record(2, Outcome.STALLED, 5),
        _record(2, Outcome.STARTED, 6),  # a later run retried it and died
    ]
    assert sorted(open_batches(history)) == [1, 2]
    assert completed_batches(history) == {0}


PLAN = {"plan_id": "p", "leader_moves": 1, "replica_moves": 2, "bytes_to_move": 30}
ACTIONS = [
    {"action": "leadership", "old_replicas": [1, 2], "new_replicas": [2, 1], "bytes_to_move": 0},
    {"action": "replica_move", "old_replicas": [1, 2], "new_replicas": [3, 4], "bytes_to_move": 30},
]
BATCHES = [{"batch": 0, "actions": 1, "bytes_to_move": 0}, {"batch": 1, "actions": 1, "bytes_to_move": 30}]


def test_a_whole_plan_passes():
    check_whole(PLAN, ACTIONS, BATCHES)


@pytest.mark.parametrize(
    "actions, batches",
    [
        ([], []),  # only balance_plans committed
        (ACTIONS, []),  # plan_batches not yet
        (ACTIONS[:1], BATCHES[:1]),  # an action missing
        (ACTIONS, BATCHES[1:]),  # a batch missing
    ],
)
def test_a_plan_missing_rows_is_not_whole(actions, batches):
    with pytest.raises(PlanIncompleteError, match="not whole in the lakehouse yet"):
        check_whole(PLAN, actions, batches)


@pytest.mark.parametrize(
    "field, value", [("poll_seconds", 0), ("stall_seconds", -1), ("fallback_throttle", 1.5)]
)
def test_options_are_checked_at_the_edge(field, value):
    with pytest.raises(ValueError, match=field):
        ExecuteOptions(**{field: value})


def test_a_started_row_keeps_exactly_the_entries_its_batch_added_and_older_rows_read_as_whole_lists():
    own = {"t": (("0:2",), ("0:3",))}
    row = ExecutionRecord(
        plan_id="p",
        cluster="c",
        run_id="r",
        batch=1,
        outcome=Outcome.STARTED,
        recorded_at=T,
        throttle={1: 5},
        throttled_topics=("t",),
        throttled_replicas=own,
    ).row()
    assert ExecutionRecord.from_row(row).throttled_replicas == own
    older = {**row, "throttled_replicas": None}  # written before the column existed
    assert ExecutionRecord.from_row(older).throttled_replicas is None


def test_entries_of_several_started_rows_merge_per_topic_and_side():
    rows = [{"t": (("0:1",), ("0:3",))}, {"t": (("1:2", "0:1"), ())}, {"u": ((), ("2:1",))}]
    merged = merged_replicas(rows)
    assert merged == {"t": (("0:1", "1:2"), ("0:3",)), "u": ((), ("2:1",))}
