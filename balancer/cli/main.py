"""``balancer``: the command line. One small module per subcommand; they share ``--config`` and ``--set``."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import NoReturn

from balancer.cli import console

# Subcommand name → module in balancer.cli with add_parser(subparsers) and run(args, config) -> int.
COMMANDS = ("run", "sql", "plan", "export", "execute", "history", "agent")
# The commands that start Spark: their stderr (the JVM's with it) goes to the log file.
SPARK_COMMANDS = ("run", "sql")


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="FILE", help="YAML on top of conf/balancer.yaml")
    common.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one config key, e.g. --set lakehouse.path=/data/lh (repeatable)",
    )
    common.add_argument(
        "--verbose",
        action="store_true",
        help="show Spark's and the libraries' logs and failure traces on the console, not in the log file",
    )
    parser = argparse.ArgumentParser(prog="balancer", description="Traffic-aware Kafka balancer")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"balancer.cli.{name}").add_parser(subparsers, parents=[common])
    return parser


def main(argv: list[str] | None = None, *, process: bool | None = None) -> int:
    """``process``: this call is the process's entry point (default: when ``argv`` is None, i.e. read
    from the command line), so it owns stderr and logging; a call from other code (a test) leaves
    them as they are and only turns a failure into its one line."""
    args = build_parser().parse_args(argv)
    module = importlib.import_module(f"balancer.cli.{args.command}")
    return console.guarded(
        args.command,
        args.config,
        args.overrides,
        lambda config, _out: module.run(args, config),
        verbose=args.verbose,
        spark=args.command in SPARK_COMMANDS,
        owns_process=argv is None if process is None else process,
    )


def entry() -> NoReturn:
    """The ``balancer`` command. A command that runs no Spark ends the process itself once its output is
    flushed: delta-rs and pyarrow leave native threads behind that can abort the interpreter's shutdown
    ("terminate called without an active exception", delta-io/delta-rs#2184) after the work is done and
    reported, turning a success into a SIGABRT."""
    code = main()
    args, _ = build_parser().parse_known_args()
    if args.command in SPARK_COMMANDS:
        sys.exit(code)
    end_process(code)


def end_process(code: int) -> NoReturn:
    """End a process that runs no Spark once its output is flushed, skipping the interpreter's
    shutdown, where delta-rs and pyarrow's native threads can abort it (see ``entry``)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
