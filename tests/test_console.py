"""The console a person reads: the product's own lines; Spark's and the libraries' logs and every
trace in the log file named at start; a failure ends with one line naming its cause."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from balancer.cli.console import describe
from balancer.config import REPO_ROOT

# What Spark, the JVM, py4j and Python print when they reach a console: log lines with a level,
# Java stack frames, Python tracebacks, log4j's and Spark's own banners.
NOISE = re.compile(
    r"\b(WARN|WARNING|INFO|ERROR|DEBUG)\b|^\s+at [\w.$]+\(|Traceback \(most recent call last\)|"
    r"log4j|Setting default log level|SparkContext|py4j|Exception in thread|^\s+File \"",
    re.M,
)


# A line of conf/log4j2.properties' layout.
JVM_LOG_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (WARN|INFO|ERROR) \w+: ", re.M)


def console_noise(output: str) -> list[str]:
    return [line for line in output.splitlines() if NOISE.search(line)]


def balancer_sql(tmp_path: Path, logs: Path, query: str) -> subprocess.CompletedProcess:
    """``balancer sql QUERY`` as a person runs it, on a delta-rs lakehouse under ``tmp_path``, its log
    file under ``logs``; stdout and stderr as one console."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "BALANCER_LOG_DIR": str(logs)}
    env.pop("BALANCER_LOG_FILE", None)
    return subprocess.run(
        [
            str(Path(sys.executable).with_name("balancer")),
            "sql",
            "--set",
            f"lakehouse.path={tmp_path / 'lh'}",
            "--set",
            "lakehouse.engine=delta-rs",
            query,
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )


def last_line(output: str) -> str:
    return [line for line in output.splitlines() if line.strip()][-1]


@pytest.mark.integration
@pytest.mark.beside
def test_unreachable_broker_ends_with_one_line_naming_brokers_and_timeout(tmp_path):
    logs = tmp_path / "logs"
    # A driver JVM option of the caller's is kept, after the script's own: this one moves Spark's log.
    jvm_log = tmp_path / "jvm.log"
    result = subprocess.run(
        [
            "./spark-submit.sh",
            "--master",
            "local[1]",
            "--conf",
            f"spark.driver.extraJavaOptions=-Dbalancer.log.file={jvm_log}",
            "--once",
            "--set",
            "source.bootstrap_servers=127.0.0.1:1",
            "--set",
            "source.unavailable_timeout=3 seconds",
            "--set",
            f"lakehouse.path={tmp_path / 'lh'}",
            "--set",
            f"checkpoint.path={tmp_path / 'cp'}",
            "--set",
            "spark.conf.spark.ui.enabled=false",
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "BALANCER_LOG_DIR": str(logs)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    output = result.stdout
    assert result.returncode != 0, output
    last = last_line(output)
    assert "127.0.0.1:1" in last and "3s" in last and "source.unavailable_timeout" in last, output
    assert "check that the brokers are up" in last, output
    assert console_noise(output) == [], output
    # Two lines in all: where the logs are, and the cause.
    assert len([line for line in output.splitlines() if line.strip()]) == 2, output

    (log,) = logs.glob("submit-*.log")
    assert log.name in output.splitlines()[0]
    logged = log.read_text()
    assert "Traceback (most recent call last)" in logged and "KafkaUnavailableError" in logged
    # Spark's own log lines landed in the file the caller's -D named, not in the script's.
    assert JVM_LOG_LINE.search(jvm_log.read_text()) and not JVM_LOG_LINE.search(logged), logged


@pytest.mark.integration
@pytest.mark.beside
def test_a_spark_command_keeps_spark_and_library_logs_off_the_console(tmp_path):
    """`balancer sql` starts Spark from Python (as `make run` does): the JVM pyspark launches logs to
    the file too, and the console shows the log line and the query's table only."""
    logs = tmp_path / "logs"
    result = balancer_sql(tmp_path, logs, "SELECT 41 + 1 AS answer")
    output = result.stdout
    assert result.returncode == 0, output
    assert "|42    |" in output, output
    assert console_noise(output) == [], output
    (log,) = logs.glob("sql-*.log")
    assert output.splitlines()[0].startswith("logs (Spark, libraries, traces): ")
    logged = log.read_text()
    assert JVM_LOG_LINE.search(logged), logged  # the JVM's log4j wrote to this file


def test_library_logs_warnings_and_raw_stderr_go_to_the_log_file_and_product_lines_to_the_console(tmp_path):
    """After ``setup`` (as a Spark command calls it), a library's log lines at any level, Python
    warnings and whatever writes to fd 2 (the JVM, Python workers) land in the log file; the
    product's own warnings and the console's lines reach the console, and only they do."""
    probe = (
        "import logging, os, warnings\n"
        "from balancer.cli.console import setup\n"
        "console = setup('probe', spark=True)\n"
        "logging.getLogger('py4j.clientserver').info('library info line')\n"
        "logging.getLogger('py4j.java_gateway').error('library error line')\n"
        "warnings.warn('a python warning line')\n"
        "os.write(2, b'raw stderr line\\n')\n"
        "logging.getLogger('balancer.job').warning('product warning line')\n"
        "console.line('product console line')\n"
    )
    logs = tmp_path / "logs"
    env = {**os.environ, "BALANCER_LOG_DIR": str(logs)}
    env.pop("BALANCER_LOG_FILE", None)
    env.pop("PYSPARK_GATEWAY_PORT", None)
    result = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    (log,) = logs.glob("probe-*.log")
    logged = log.read_text()
    console = result.stderr + result.stdout
    for line in ("library info line", "library error line", "a python warning line", "raw stderr line"):
        assert line in logged and line not in console, (line, console)
    assert "product warning line" in console and "product console line" in console, console
    assert console.splitlines()[0].startswith("logs (Spark, libraries, traces): "), console


@pytest.mark.integration
@pytest.mark.beside
def test_the_demo_console_shows_its_own_lines_while_streaming(tmp_path):
    """`make run-sim`'s entry for a quarter minute of streaming (the whole demo takes minutes): Spark's
    streaming warnings ("Current batch is falling behind") and Great Expectations' INFO lines go to
    the file. Too short to carry out a plan, so it ends with the demo's own line saying so."""
    logs = tmp_path / "logs"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "BALANCER_LOG_DIR": str(logs)}
    env.pop("BALANCER_LOG_FILE", None)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "balancer.demo",
            "--max-seconds",
            "15",
            "--set",
            f"lakehouse.path={tmp_path / 'lh'}",
            "--set",
            f"checkpoint.path={tmp_path / 'cp'}",
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    output = result.stdout
    assert result.returncode == 1, output
    assert output.splitlines()[0].startswith("logs (Spark, libraries, traces): "), output
    assert "embedded Kafka broker on 127.0.0.1:" in output
    assert console_noise(output) == [], output
    assert last_line(output) == "no plan was carried out: the demo did not show balancing", output
    (log,) = logs.glob("demo-*.log")
    assert JVM_LOG_LINE.search(log.read_text())


@pytest.mark.integration
@pytest.mark.beside
def test_a_failing_spark_command_ends_with_one_line_and_exit_code(tmp_path):
    logs = tmp_path / "logs"
    result = balancer_sql(tmp_path, logs, "SELECT nope FROM no_such_table")
    output = result.stdout
    assert result.returncode == 1, output
    last = last_line(output)
    assert last.startswith("balancer sql: ") and "no_such_table" in last, output
    assert "trace in " in last
    assert console_noise(output) == [], output
    (log,) = logs.glob("sql-*.log")
    assert "Traceback (most recent call last)" in log.read_text()


def test_describe_names_our_error_inside_a_spark_trace():
    from balancer.spark.ingest.kafka import KafkaUnavailableError

    class StreamingQueryException(Exception):  # noqa: N818 - pyspark's name, which the trace carries
        pass

    trace = (
        "[STREAM_FAILED] Query [id = 1] terminated with exception: ...\n"
        'File "/x/admin.py", line 312, in retry\n'
        "balancer.spark.ingest.kafka.options.KafkaUnavailableError: Kafka brokers b1:9092,b2:9092 "
        "unavailable for 60s (kafkaUnavailableTimeoutMs) while listing topics: "
        'KafkaError{code=_TRANSPORT,str="x"}\n'
        "=== Streaming Query ===\nLogical Plan: ..."
    )
    line = describe(StreamingQueryException(trace))
    assert line.startswith("Kafka brokers b1:9092,b2:9092 unavailable for 60s (source.unavailable_timeout)")
    assert "KafkaError" not in line and "\n" not in line and "Logical Plan" not in line
    direct = describe(
        KafkaUnavailableError("Kafka brokers b1:9092 unavailable for 5s (kafkaUnavailableTimeoutMs)")
    )
    assert "source.unavailable_timeout" in direct and "check that the brokers are up" in direct
    assert describe(RuntimeError("first line\nsecond line")) == "first line"
    wrapped = StreamingQueryException(
        "[STREAM_FAILED] Query terminated with exception: [FOREACH_BATCH_USER_FUNCTION_ERROR] An error "
        "occurred in the user provided function. Return Message: Traceback (most recent call last):\n"
        '  File "/x/sinks.py", line 1, in __call__\n'
        "ValueError: window 03:10 has no brokers\n\tat org.apache.x"
    )
    assert describe(wrapped) == "ValueError: window 03:10 has no brokers"
    assert describe(OSError(28, "No space left on device")).endswith("No space left on device")


def test_every_entry_point_frame_stops_a_bad_config_before_its_body_and_turns_a_failure_into_one_line(
    capsys,
):
    """``guarded``: a bad setting is exit code 2 naming it, and the body (Spark, the demo) never runs; a
    body's code is the exit code; a failure is exit code 1 and one line naming its cause."""
    from balancer.cli.console import guarded

    ran: list[str] = []

    def body(config, out):
        ran.append(config.windows.size)
        return 7

    assert guarded("probe", None, ["windows.size=banana"], body, owns_process=False) == 2
    assert ran == [] and "windows.size" in capsys.readouterr().err
    assert guarded("probe", None, ["windows.size=10 minutes"], body, owns_process=False) == 7
    assert ran == ["10 minutes"]

    def failing(config, out):
        raise RuntimeError("the brokers went away\nsecond line of detail")

    assert guarded("probe", None, [], failing, owns_process=False) == 1
    assert capsys.readouterr().err.splitlines()[-1] == "balancer probe: the brokers went away"
