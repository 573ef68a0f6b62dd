"""``balancer export PLAN_ID --out DIR``: a plan's batches as files Kafka's own tools take, and run.sh.

Reads the plan's rows of ``plan_batches`` with delta-rs (no Spark: it takes a second). A plan
recorded before ``plan_batches`` existed is batched here from ``plan_actions`` with the
``executor`` limits, its throttles computed from the ``broker_load``/``partition_load`` of the
plan's window for ``executor.deadline``. A replica batch without a computed throttle (its window
lacked a broker's capacity) is exported only with ``--throttle BYTES_PER_SEC``: replica moves
never run unthrottled. The files and script: ``balancer.execution.export``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from balancer.config import Config
from balancer.execution import BrokerLoad, ExportError, batch_rows, export_plan, plan_schedule, split_batches
from balancer.execution.export import DEFAULT_BOOTSTRAP, actions_from_rows
from balancer.storage import Storage


def add_parser(subparsers, parents=()) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "export", parents=list(parents), help="write a plan's batches as Kafka tool files and a run.sh"
    )
    parser.add_argument("plan_id", metavar="PLAN_ID", help="the plan (balance_plans.plan_id)")
    parser.add_argument("--out", metavar="DIR", required=True, help="new or empty folder to write into")
    parser.add_argument(
        "--bootstrap-servers",
        metavar="HOSTS",
        default=DEFAULT_BOOTSTRAP,
        help="what the files show for the bootstrap servers, and run.sh's fallback "
        "(default: run.sh takes them from its argument or $BOOTSTRAP_SERVERS)",
    )
    parser.add_argument(
        "--force", action="store_true", help="write into a non-empty folder (same names overwritten)"
    )
    parser.add_argument(
        "--throttle",
        metavar="BYTES_PER_SEC",
        type=int,
        help="one replication throttle for replica batches the plan has no computed throttle for",
    )
    return parser


def _rows(root: Storage, table: str, **equal) -> list[dict] | None:
    """Rows of ``table`` whose columns equal ``equal``; None if the table does not exist."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    path, options = root.join(table), root.delta_options()
    if not DeltaTable.is_deltatable(path, storage_options=options):
        return None
    condition = None
    for column, value in equal.items():
        term = pc.field(column) == value
        condition = term if condition is None else condition & term
    return DeltaTable(path, storage_options=options).to_pyarrow_table(filters=condition).to_pylist()


def _from_actions(root: Storage, plan_id: str, config: Config) -> list[dict]:
    """plan_batches rows for a plan that only has plan_actions: batched and throttled here."""
    actions = _rows(root, "plan_actions", plan_id=plan_id)
    if not actions:
        raise ExportError(f"plan {plan_id}: not in plan_batches nor plan_actions under {root.root}")
    plans = _rows(root, "balance_plans", plan_id=plan_id) or []
    if not plans:
        raise ExportError(f"plan {plan_id}: in plan_actions but not in balance_plans (its window is unknown)")
    cluster, window_end = plans[0]["cluster"], plans[0]["window_end"]
    brokers = [r for r in _rows(root, "broker_load", cluster=cluster) or [] if r["window_end"] == window_end]
    partitions = [
        r for r in _rows(root, "partition_load", cluster=cluster) or [] if r["window_end"] == window_end
    ]
    if not brokers or not partitions:
        raise ExportError(
            f"plan {plan_id}: no broker_load/partition_load for its window {window_end}; "
            "cannot compute throttles"
        )
    executor = config.executor
    batches = split_batches(
        actions_from_rows(actions),
        max_leadership_moves=executor.max_leadership_moves,
        max_partition_moves_per_broker=executor.max_partition_moves_per_broker,
        max_partition_moves=executor.max_partition_moves,
    )
    loads = {
        int(r["broker"]): BrokerLoad(
            r["network_in"] or 0.0,
            r["network_out"] or 0.0,
            r["capacity_network_in"],
            r["capacity_network_out"],
        )
        for r in brokers
    }
    traffic = {(r["topic"], int(r["partition"])): r["bytes_in"] or 0.0 for r in partitions}
    schedule = plan_schedule(
        batches,
        deadline_seconds=executor.deadline.seconds,
        broker_load=loads,
        capacity_threshold=config.balancer.capacity_threshold,
        partition_traffic=traffic,
    )
    if schedule.note:
        print(f"balancer export: {schedule.note}", file=sys.stderr)
    return batch_rows(batches, schedule.throttles, plan_id=plan_id, cluster=cluster)


def run(args: argparse.Namespace, config: Config) -> int:
    root = Storage.of(config.lakehouse.path, config.lakehouse.storage_options)
    try:
        rows = _rows(root, "plan_batches", plan_id=args.plan_id)
        if not rows:
            rows = _from_actions(root, args.plan_id, config)
        written = export_plan(
            rows,
            args.out,
            bootstrap_placeholder=args.bootstrap_servers,
            overwrite=args.force,
            fallback_throttle=args.throttle,
        )
    except (ExportError, FileExistsError, ValueError) as exc:
        print(f"balancer export: {exc}", file=sys.stderr)
        return 2
    print(
        f"plan {args.plan_id}: {len(rows)} batch(es) written to {args.out} ({len(written)} files); "
        f"run: {Path(args.out) / 'run.sh'} BOOTSTRAP_SERVERS"
    )
    return 0
