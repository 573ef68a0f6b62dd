"""How ``balancer.spark.job.Job`` counts its attempts: failed starts in a row. A query that made progress
before it failed had started, so its failure begins a new count; a query that fails before any progress,
start after start, ends the job after ``START_ATTEMPTS``.

Real Spark streaming queries (a rate source, a ``foreachBatch`` sink) stand for the job's query; their sink
raises Spark's missed-start text, on the first batch (no progress) or on the second (after one). The
Kafka source's real missed start, through `balancer run`, is proven in test_source_start."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from balancer.config import load_config
from balancer.spark.job import _SOURCE_START_MISSED, START_ATTEMPTS, Job, SourceStartError

pytestmark = pytest.mark.integration


def failing_queries(spark: SparkSession, *, fail_at_batch: int, failing_starts: int) -> tuple[Callable, list]:
    """A starter of one rate-source query whose sink raises the missed-start text at batch ``fail_at_batch``
    on its first ``failing_starts`` starts (later starts run on), and the list of starts it made."""
    starts: list[int] = []

    def starter() -> list[StreamingQuery]:
        starts.append(len(starts) + 1)
        fails = len(starts) <= failing_starts

        def sink(_frame, batch_id: int) -> None:
            if fails and batch_id >= fail_at_batch:
                raise RuntimeError(f"{_SOURCE_START_MISSED} (raised by the test's sink)")

        query = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", 10)
            .load()
            .writeStream.trigger(processingTime="200 milliseconds")
            .foreachBatch(sink)
            .start()
        )
        return [query]

    return starter, starts


def check_until(job: Job, done: Callable[[], bool], *, timeout_seconds: float = 120) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not done():
        assert time.monotonic() < deadline, f"not done in {timeout_seconds} s: attempt {job.attempt}"
        job.check()
        time.sleep(0.2)


def stop(job: Job) -> None:
    for query in job.queries:
        query.stop()
    job.spark.streams.resetTerminated()


def test_failures_after_progress_do_not_use_up_the_start_attempts(spark, caplog):
    failing = START_ATTEMPTS + 1  # one more than the attempts: counted in a row, they would end the job
    starter, starts = failing_queries(spark, fail_at_batch=1, failing_starts=failing)
    job = Job(spark, load_config(), starter=starter)
    try:
        # Started again after each failure, and the start after the last failing one runs on.
        check_until(job, lambda: len(starts) > failing and bool(job.queries[0].recentProgress))
        assert job.queries[0].isActive and job.queries[0].exception() is None
        assert job.attempt == 2, "each failure after progress should begin a new count"
        said = [r.getMessage() for r in caplog.records if r.name == "balancer.spark.job"]
        worker = "a Python worker of the running query"
        assert len(said) == failing and all(m.startswith(worker) for m in said), said
    finally:
        stop(job)


def test_failures_before_any_progress_end_the_job_after_the_last_attempt(spark):
    starter, starts = failing_queries(spark, fail_at_batch=0, failing_starts=START_ATTEMPTS + 1)
    job = Job(spark, load_config(), starter=starter)
    try:
        with pytest.raises(SourceStartError, match=f"on each of {START_ATTEMPTS} attempts"):
            check_until(job, lambda: False)
        assert len(starts) == START_ATTEMPTS
    finally:
        stop(job)
