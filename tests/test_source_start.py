"""A query whose Kafka source missed Spark's start-up deadline is started again, a bounded number of times;
any other failure ends the run at once (``balancer.spark.job.Job``).

Through the real path: `balancer run --once` as a subprocess, real Spark, our ``kafka_py`` source, Delta
tables on disk. Spark starts the source's Python process with ``PYSPARK_PYTHON`` and gives it a fixed
10 s to connect back; here that executable is a wrapper (``SLOW_PYTHON``) which, for the source's process
only, sleeps past the deadline before running the real interpreter, on the first N starts. It records each
start, so a test counts how many times the query was started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from deltalake import DeltaTable
from support import BALANCER, minutes_of, produce, simulated, write_config

from balancer.spark.job import START_ATTEMPTS

# The jobs run in subprocesses and mostly wait on Spark's start-up deadline: `make test` runs this module in
# the lane beside the Spark tests.
pytestmark = [pytest.mark.integration, pytest.mark.beside]

# The module Spark runs a Python data source's streaming reader in (PythonStreamingSourceRunner).
SOURCE_RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"
# Past Spark's fixed 10 s for the source's process to connect back.
LATE_SECONDS = 15
MISSED = "Python worker failed to connect back"

# Spark's Python executable for a job: every Python process Spark starts runs the real interpreter; the
# streaming source's process first records its start (a file in the starts folder) and, on the first
# ``slow`` starts, sleeps past the deadline.
SLOW_PYTHON = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "{runner}" ]; then
    mktemp "{starts}/start.XXXXXX" >/dev/null
    if [ "$(ls "{starts}" | wc -l)" -le {slow} ]; then
        sleep {late}
    fi
fi
exec "{python}" "$@"
"""


def slow_python(tmp_path: Path, slow: int) -> tuple[Path, Path]:
    """The wrapper, late on the first ``slow`` starts of the source's process: its path, its starts folder."""
    starts = tmp_path / "source-starts"
    starts.mkdir()
    wrapper = tmp_path / "slow-python"
    wrapper.write_text(
        SLOW_PYTHON.format(
            runner=SOURCE_RUNNER, starts=starts, slow=slow, late=LATE_SECONDS, python=sys.executable
        )
    )
    wrapper.chmod(0o755)
    return wrapper, starts


@dataclass
class Run:
    """How a `balancer run --once` ended: its exit code, how many times the source's process was started,
    the attempts the job announced it was starting again, its last console line (a failure's cause)."""

    code: int
    starts: int
    restarts: list[int]
    last: str
    log: Path

    def __str__(self) -> str:
        return (
            f"exit {self.code}, source started {self.starts} times, restarts announced {self.restarts}, "
            f"last line {self.last!r} (log: {self.log})"
        )


def run_once(config: Path, python: Path, starts: Path, log: Path) -> Run:
    """`balancer run --once` with Spark's Python processes started by ``python``. Whatever it leaves behind
    in its process group (a late source process still asleep) is ended with it."""
    env = {**os.environ, "PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": sys.executable}
    env["BALANCER_LOG_FILE"] = str(log)
    with open(log, "ab") as out:
        job = subprocess.Popen(
            [BALANCER, "run", "--config", str(config), "--once"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    try:
        code = job.wait(timeout=300)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"balancer run --once did not end in 300 s (log: {log})") from None
    finally:
        try:
            os.killpg(job.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        job.wait()
    text = log.read_text(errors="replace")
    # The console and the log file (here one file) both carry each warning: an attempt is counted once.
    announced = [
        n for n in range(2, START_ATTEMPTS + 2) if f"starting the query again (attempt {n} of " in text
    ]
    console = [line for line in text.splitlines() if line.startswith("balancer run: ")]
    return Run(code, len(list(starts.iterdir())), announced, console[-1] if console else "", log)


def test_a_source_that_missed_its_start_is_started_again_and_lands_each_record_once(broker, topic, tmp_path):
    sent = produce(broker.bootstrap_servers, topic, minutes_of(simulated(), 0, 1))
    python, starts = slow_python(tmp_path, slow=1)

    run = run_once(
        write_config(tmp_path, broker.bootstrap_servers, topic), python, starts, tmp_path / "job.log"
    )

    assert run.code == 0, f"the run did not complete: {run}"
    # A start after the late one may miss too on a busy host: it is started again, within the attempts.
    assert run.restarts[:1] == [2], f"no restart announced as attempt 2 after the late start: {run}"
    assert run.starts == 1 + len(run.restarts), f"a start the job did not announce: {run}"
    raw = DeltaTable(str(tmp_path / "lakehouse" / "telemetry_raw")).to_pyarrow_table().to_pylist()
    landed = [(row["kafka_partition"], row["kafka_offset"]) for row in raw]
    assert len(set(landed)) == len(landed) == sent, f"{sent} records sent; landed {sorted(landed)}"


def test_a_source_that_misses_every_start_fails_the_run_after_the_last_attempt(broker, topic, tmp_path):
    # Late on one start more than the attempts: a job that tried once more would still fail, and be seen.
    python, starts = slow_python(tmp_path, slow=START_ATTEMPTS + 1)

    run = run_once(
        write_config(tmp_path, broker.bootstrap_servers, topic), python, starts, tmp_path / "job.log"
    )

    assert (run.code, run.starts) == (1, START_ATTEMPTS), (
        f"expected a failure after {START_ATTEMPTS} starts: {run}"
    )
    assert run.restarts == list(range(2, START_ATTEMPTS + 1)), f"attempts announced wrongly: {run}"
    # The job's own error: the last of the attempts, and why the source missed its start.
    named = f"Python process missed Spark's 10 s start-up deadline on each of {START_ATTEMPTS} attempts"
    assert named in run.last, f"not the job's error: {run}"
    assert MISSED in run.last, f"the failure is not the missed start: {run}"


def test_any_other_failure_ends_the_run_without_starting_the_query_again(tmp_path):
    """Nothing listens on the brokers' address: the source fails once its unavailable timeout passes."""
    python, starts = slow_python(tmp_path, slow=0)
    config = write_config(tmp_path, "127.0.0.1:1", "metrics", source={"unavailable_timeout": "1 second"})

    run = run_once(config, python, starts, tmp_path / "job.log")

    assert run.code == 1 and "127.0.0.1:1 unavailable" in run.last, f"not the brokers' failure: {run}"
    # One start, or more if a start missed the deadline on a busy host; the brokers' failure came with an
    # attempt left, and the query was not started again.
    assert run.starts == 1 + len(run.restarts) < START_ATTEMPTS, f"started again after the failure: {run}"
