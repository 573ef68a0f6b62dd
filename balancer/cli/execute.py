"""``balancer execute PLAN_ID``: carry a proposed plan out on its Kafka cluster, batch by batch.

Leadership batches first (preferred elections), then each replica batch at its computed throttle
(``balancer.execution.executor`` has the rules). The plan and what was done are read from and written
to the lakehouse (``plan_executions``), so a run killed at any point is resumed by running the same
command again; ``--stop`` cancels the batch in flight and removes its throttles; ``--dry-run`` prints
the steps and changes nothing. The cluster: ``executor.bootstrap_servers`` / ``executor.options``
(default: metadata's, then source's).
"""

from __future__ import annotations

import argparse
import sys

from balancer.config import Config
from balancer.execution.executor import ExecuteOptions, ExecutionError, Executor, measured_line
from balancer.storage import Storage


def add_parser(subparsers, parents=()) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "execute", parents=list(parents), help="carry a proposed plan out on the Kafka cluster"
    )
    parser.add_argument("plan_id", metavar="PLAN_ID", help="the plan (balance_plans.plan_id)")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--dry-run", action="store_true", help="print what it would do; change nothing")
    action.add_argument(
        "--stop", action="store_true", help="cancel the batch in flight (it reverts) and remove its throttles"
    )
    parser.add_argument(
        "--throttle",
        metavar="BYTES_PER_SEC",
        type=int,
        help="one replication throttle for replica batches the plan has no computed throttle for",
    )
    parser.add_argument(
        "--bootstrap-servers",
        metavar="HOSTS",
        help="the cluster to change (default: executor.bootstrap_servers)",
    )
    return parser


def run(args: argparse.Namespace, config: Config) -> int:
    from balancer.execution.kafka_admin import KafkaPythonAdmin
    from balancer.execution.store import DeltaPlanStore

    servers, options = config.executor.cluster(config)
    try:
        execute_options = ExecuteOptions(
            poll_seconds=config.executor.poll_interval.seconds,
            stall_seconds=config.executor.stall_timeout.seconds,
            fallback_throttle=args.throttle,
        )
    except ValueError as error:
        print(f"balancer execute: {error}", file=sys.stderr)
        return 2
    store = DeltaPlanStore(
        Storage.of(config.lakehouse.path, config.lakehouse.storage_options),
        table_properties=config.lakehouse.retention.table_properties(),
    )

    def say(line: str) -> None:
        print(line, flush=True)

    try:
        with KafkaPythonAdmin(args.bootstrap_servers or servers, options) as admin:
            executor = Executor(admin, store, options=execute_options, say=say)
            if args.dry_run:
                for line in executor.dry_run(args.plan_id):
                    say(line)
                return 0
            if args.stop:
                stopped = executor.stop(args.plan_id)
                say(
                    f"plan {args.plan_id}: stop recorded; "
                    + (
                        f"batch(es) {stopped} cancelled, throttles removed"
                        if stopped
                        else "no batch was in flight"
                    )
                )
                return 0
            report = executor.run(args.plan_id)
    except ExecutionError as error:
        print(f"balancer execute: {error}", file=sys.stderr)
        return 1
    for result in report.ran:
        say(measured_line(result))
    return 0
