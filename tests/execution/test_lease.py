"""The plan's lease rules (``balancer.execution.lease``) over ``plan_executions`` rows. (A second
``balancer execute`` refused on real Kafka while the first runs: test_execute_kafka.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from balancer.execution import lease
from balancer.execution.records import PLAN_LEVEL, ExecutionRecord, Outcome

T = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
LEASE = 60.0
HERE, THERE = "here", "there"


def row(run: str, outcome: Outcome, second: float, host: str = THERE, pid: int = 7) -> ExecutionRecord:
    return ExecutionRecord(
        plan_id="p",
        cluster="c",
        run_id=run,
        batch=PLAN_LEVEL,
        outcome=outcome,
        recorded_at=T + timedelta(seconds=second),
        detail=lease.Claim.detail(host, pid) if outcome is Outcome.RUNNING else "the run ended",
    )


def holder(history, now: float, me: str | None = None, alive=lambda pid: True):
    found = lease.holder(
        history, now=T + timedelta(seconds=now), lease_seconds=LEASE, me=me, host=HERE, alive=alive
    )
    return found.run_id if found else None


def test_a_run_on_another_host_holds_the_plan_until_its_lease_runs_out():
    history = [row("a", Outcome.RUNNING, 0), row("a", Outcome.RUNNING, 20)]
    assert holder(history, now=79) == "a"  # renewed at 20: held until 80
    assert holder(history, now=81) is None


def test_a_released_run_holds_nothing_even_within_its_lease():
    history = [row("a", Outcome.RUNNING, 0), row("a", Outcome.RELEASED, 5)]
    assert holder(history, now=6) is None


def test_a_run_on_this_host_whose_process_is_gone_is_taken_over_at_once():
    history = [row("a", Outcome.RUNNING, 0, host=HERE, pid=4242)]
    assert holder(history, now=1, alive=lambda pid: pid != 4242) is None
    assert holder(history, now=1, alive=lambda pid: pid == 4242) == "a"


def test_of_two_claims_at_once_the_older_keeps_the_plan_and_the_newer_sees_it():
    history = [row("b", Outcome.RUNNING, 0.5), row("a", Outcome.RUNNING, 0.0)]
    assert holder(history, now=1, me="a") is None  # a claimed first: it goes on
    assert holder(history, now=1, me="b") == "a"  # b must refuse
    same_instant = [row("b", Outcome.RUNNING, 0), row("a", Outcome.RUNNING, 0)]
    assert holder(same_instant, now=1, me="a") is None  # a tie goes to the smaller run id
    assert holder(same_instant, now=1, me="b") == "a"


def test_a_claim_keeps_its_first_time_when_renewed():
    """A renewal must not make a long-running holder look newer than a run that claimed after it."""
    history = [row("a", Outcome.RUNNING, 0), row("b", Outcome.RUNNING, 10), row("a", Outcome.RUNNING, 20)]
    assert holder(history, now=21, me="b") == "a"
    assert holder(history, now=21, me="a") is None


def test_rows_that_are_not_claims_are_ignored():
    stop = ExecutionRecord(
        plan_id="p", cluster="c", run_id="s", batch=PLAN_LEVEL, outcome=Outcome.STOP_REQUESTED, recorded_at=T
    )
    started = ExecutionRecord(
        plan_id="p", cluster="c", run_id="x", batch=1, outcome=Outcome.STARTED, recorded_at=T
    )
    assert holder([stop, started], now=1) is None


def test_a_running_row_whose_detail_names_no_process_claims_nothing():
    """Rows are read back from a table anyone may write: a garbled detail is no claim, never an error."""
    for detail in (None, "", "pid x on host h", "pid 7 on host", "pid 7 on host a b", "\xff\x00"):
        bad = ExecutionRecord(
            plan_id="p",
            cluster="c",
            run_id="g",
            batch=PLAN_LEVEL,
            outcome=Outcome.RUNNING,
            recorded_at=T,
            detail=detail,
        )
        assert holder([bad], now=1) is None, detail
