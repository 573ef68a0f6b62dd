"""consumer_assignments rows: every assigned partition, idle members and unowned commits are on record."""

from __future__ import annotations

from balancer.consumers.rows import COLUMNS, assignment_rows, lag
from consumers.builders import group, member, snapshot


def test_lag_is_end_minus_committed_and_unknown_without_a_commit():
    assert lag(40, 100) == 60
    assert lag(None, 100) is None and lag(40, None) is None
    assert lag(120, 100) == 0  # a commit past a truncated log's end leaves nothing to consume


def test_rows_record_assigned_partitions_idle_members_and_commits_nobody_holds():
    read = snapshot(
        0,
        group(
            [member("a-1", ("t", 0)), member("b-1")],
            committed={("t", 0): 10, ("t", 1): 5},
        ),
        end={("t", 0): 30, ("t", 1): 9},
    )
    rows = assignment_rows(read)
    assert all(set(r) == set(COLUMNS) for r in rows)
    found = {(r["member_id"], r["topic"], r["partition"], r["lag"]) for r in rows}
    assert found == {("a-1", "t", 0, 20), ("b-1", None, None, None), (None, "t", 1, 4)}
    assert {r["members"] for r in rows} == {2}


def test_a_group_with_neither_members_nor_commits_still_has_a_row():
    rows = assignment_rows(snapshot(0, group([])))
    assert [(r["group_id"], r["member_id"], r["topic"], r["group_state"]) for r in rows] == [
        ("g", None, None, "stable")
    ]
