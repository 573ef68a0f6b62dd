"""What reaches the console: the product's own lines. Everything else goes to the run's log file.

Spark's JVM logs (log4j2, configured by conf/log4j2.properties), anything written to stderr (the
JVM's own early lines, Python workers, warnings, tracebacks) and the Python logging of libraries
(py4j, Great Expectations, ...) go to one log file per run, whose path is printed first. The
product's loggers (``balancer.*``) still show warnings and errors on the console. A failure ends
with one line naming its cause in the product's words (:func:`describe`), the trace in the log.
``--verbose`` leaves the console as Spark and the libraries have it: everything is shown there.

The log file is ``$BALANCER_LOG_FILE`` when set (spark-submit.sh names it, because the JVM starts
before Python), else ``$BALANCER_LOG_DIR/<command>-<UTC time>-<pid>.log`` (default folder
``data/logs``).
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from balancer.resources import resource_root

if TYPE_CHECKING:
    from balancer.config import Config

LOG_FILE_ENV = "BALANCER_LOG_FILE"
LOG_DIR_ENV = "BALANCER_LOG_DIR"
DEFAULT_LOG_DIR = "data/logs"
LOG4J2_PROPERTIES = resource_root() / "conf" / "log4j2.properties"
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@dataclass
class Console:
    """The product's console stream and the run's log file (None with ``--verbose``)."""

    command: str
    stream: TextIO
    log_path: Path | None

    def line(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def fail(self, exc: BaseException) -> int:
        """Log ``exc`` with its trace, print its one-line cause; the exit code (1, or 130 on Ctrl-C)."""
        _log_trace(exc)
        if isinstance(exc, KeyboardInterrupt):
            self.line(f"balancer {self.command}: interrupted")
            return 130
        where = f" (trace in {_shown(self.log_path)})" if self.log_path else ""
        self.line(f"balancer {self.command}: {describe(exc)}{where}")
        return 1


def guarded(
    command: str,
    config_path: str | Path | None,
    overrides: Sequence[str],
    body: Callable[[Config, Console], int | None],
    *,
    verbose: bool = False,
    spark: bool = True,
    owns_process: bool = True,
) -> int:
    """Every entry point's frame: the config parsed once into its typed object (a bad one is its one
    line on stderr and exit code 2, before the console is routed or Spark starts), the console routed
    (``owns_process``; a caller in other code, a test, keeps stderr and logging as they are), then
    ``body``; a failure is its one line (exit code 1, or 130 on Ctrl-C), its trace in the log."""
    from balancer.config import ConfigError, load_config

    try:
        config = load_config(config_path, tuple(overrides))
    except ConfigError as exc:
        print(f"balancer: {exc}", file=sys.stderr)
        return 2
    out = setup(command, verbose=verbose, spark=spark) if owns_process else Console(command, sys.stderr, None)
    try:
        return body(config, out) or 0
    except (Exception, KeyboardInterrupt) as exc:
        return out.fail(exc)


def _log_trace(exc: BaseException) -> None:
    # Not a balancer.* logger: the trace goes to the log file only (and to the console with --verbose).
    text = "".join(traceback.format_exception(exc))
    logging.getLogger("failure").error("failed:\n%s", text.rstrip())


def log_file_for(command: str) -> Path:
    """This run's log file: ``$BALANCER_LOG_FILE``, or a new name under the log folder."""
    named = os.environ.get(LOG_FILE_ENV)
    if named:
        return Path(named)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    folder = Path(os.environ.get(LOG_DIR_ENV) or DEFAULT_LOG_DIR)
    path = folder / f"{command}-{stamp}-{os.getpid()}.log"
    return path.resolve()


def jvm_log_options(log_path: Path) -> str:
    """Driver JVM options that send Spark's log4j2 output to ``log_path``."""
    return f"-Dlog4j2.configurationFile=file:{LOG4J2_PROPERTIES} -Dbalancer.log.file={log_path}"


def setup(command: str, *, verbose: bool = False, spark: bool = True) -> Console:
    """Route this process's output: call once, at the entry point, before Spark starts.

    ``spark``: the command starts Spark, so stderr (and with it the JVM's) becomes the log file, whose
    path is printed (unless spark-submit.sh named it: it printed it before the JVM started). Other
    commands keep stderr and write the log file only if something is logged, e.g. a failure's trace.
    """
    if verbose:
        logging.basicConfig(level=logging.INFO, format=_FORMAT, stream=sys.stderr, force=True)
        return Console(command, sys.stderr, None)
    inherited = bool(os.environ.get(LOG_FILE_ENV))
    path = log_file_for(command)
    path.parent.mkdir(parents=True, exist_ok=True)
    console: TextIO = sys.stderr
    if spark:
        sys.stderr.flush()
        # The product's lines go where stderr went (the terminal; under spark-submit, the pipe the JVM
        # copies to its stdout); stderr itself (fd 2, inherited by the JVM this process starts)
        # becomes the log file.
        console = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")
        log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        os.environ[LOG_FILE_ENV] = str(path)
        if "PYSPARK_GATEWAY_PORT" not in os.environ:  # under spark-submit the JVM is already running
            # pyspark starts the driver JVM with these spark-submit arguments.
            options = shlex.quote(jvm_log_options(path))
            os.environ["PYSPARK_SUBMIT_ARGS"] = (
                f"--driver-java-options {options} " + os.environ.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell")
            ).strip()

    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    to_file = logging.FileHandler(path, encoding="utf-8", delay=not spark)
    to_file.setFormatter(logging.Formatter(_FORMAT))
    root.addHandler(to_file)
    root.setLevel(logging.INFO)
    to_console = logging.StreamHandler(console)
    to_console.setLevel(logging.WARNING)
    to_console.setFormatter(logging.Formatter("balancer: %(levelname)s %(message)s"))
    product = logging.getLogger("balancer")
    product.addHandler(to_console)
    product.setLevel(logging.INFO)
    logging.captureWarnings(True)
    result = Console(command, console, path)
    if spark and not inherited:
        result.line(f"logs (Spark, libraries, traces): {_shown(path)}; --verbose shows them here")
    return result


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


# A typed error of ours, wherever it was raised (the driver, a Python worker, the streaming source
# runner): its class and the first line of its message, as Spark's traces carry them.
_OWN_ERROR = re.compile(r"\bbalancer\.[\w.]*\.(\w+(?:Error|Exception)): ([^\n]+)")
# A builtin exception (its name unqualified) ending a Python traceback that Spark carried back from a
# worker or a foreachBatch call: the line under Spark's own wrapping messages.
_RAISED_IN_PYTHON = re.compile(
    r"Traceback \(most recent call last\):.*?^([A-Z]\w*(?:Error|Exception)): ([^\n]+)", re.S | re.M
)
_KAFKA_CHECK = (
    "; check that the brokers are up and reachable from this host and the Spark executors "
    "(source.bootstrap_servers), and source.options for the listener's security settings"
)


def describe(exc: BaseException) -> str:
    """One line naming the cause of ``exc`` in the product's words."""
    if type(exc).__module__.startswith("balancer."):
        kind, message = type(exc).__name__, " ".join(str(exc).split())
    else:
        texts = []
        seen: BaseException | None = exc
        while seen is not None and len(texts) < 10:
            texts.append(f"{type(seen).__module__}.{type(seen).__qualname__}: {seen}")
            seen = seen.__cause__ or seen.__context__
        text = "\n".join(texts)
        match = _OWN_ERROR.search(text)
        raised = _RAISED_IN_PYTHON.search(text)
        if match is None and raised is not None:
            return f"{raised.group(1)}: {raised.group(2).strip()}"
        if match is None:
            first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
            if type(exc).__module__ == "builtins" and first:
                return first
            return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
        kind, message = match.group(1), match.group(2).strip()
    if kind.startswith("Kafka"):
        message = message.replace("(kafkaUnavailableTimeoutMs)", "(source.unavailable_timeout)")
        if kind == "KafkaUnavailableError":
            # The client's own error code is in the log; the line says what to check.
            message = re.sub(r": KafkaError\{.*$", "", message) + _KAFKA_CHECK
    return message
