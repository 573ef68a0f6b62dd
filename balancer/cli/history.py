"""``balancer history TABLE | --plan PLAN_ID``: the lakehouse's commit history, for audit.

``TABLE``: the table's commits, newest first (version, UTC time, operation, rows added).
``--plan PLAN_ID``: the commit that added the plan to ``balance_plans`` and the version every table
had at that moment: what the job had committed when it made the plan. The line it prints last is
the ``balancer sql --as-of`` command that reads all tables as they were then. Reads the Delta logs
with delta-rs (no Spark), so it answers in a second on either engine's tables.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from datetime import UTC, datetime

from balancer.config import Config
from balancer.storage import Storage


class HistoryError(ValueError):
    """The table or plan asked for is not in the lakehouse; the message names it."""


@dataclass(frozen=True)
class Commit:
    version: int
    at: datetime
    operation: str
    rows_added: int | None


def add_parser(subparsers, parents=()) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "history",
        parents=list(parents),
        help="a table's Delta commits, or what every table held when a plan was made (audit)",
    )
    parser.add_argument("table", nargs="?", metavar="TABLE", help="e.g. balance_plans, telemetry_raw")
    parser.add_argument(
        "--plan", metavar="PLAN_ID", help="the commit that added this plan, and every table then"
    )
    parser.add_argument("--limit", type=int, default=20, help="commits to print for TABLE (default 20)")
    return parser


def stamp(at: datetime) -> str:
    """A commit time as ``balancer sql --as-of`` takes it (UTC, milliseconds: Delta's resolution)."""
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def commits(root: Storage, table: str) -> list[Commit]:
    """``table``'s commits, newest first."""
    from deltalake import DeltaTable

    path, options = _table(root, table), root.delta_options()
    entries = DeltaTable(path, storage_options=options).history()
    result = []
    for entry in entries:
        metrics = entry.get("operationMetrics") or {}
        added = metrics.get("num_added_rows", metrics.get("numOutputRows"))
        result.append(
            Commit(
                version=int(entry["version"]),
                at=datetime.fromtimestamp(entry["timestamp"] / 1000, UTC),
                operation=str(entry.get("operation", "")),
                rows_added=None if added is None else int(added),
            )
        )
    return sorted(result, key=lambda c: c.version, reverse=True)


# Tables with a plan's own rows: balance_plans first, the others written after it in the same
# micro-batch (actions, batches) or later windows (events, outcomes).
PLAN_TABLES = ("balance_plans", "plan_actions", "plan_batches", "plan_events", "plan_outcomes")


def plan_commit(root: Storage, plan_id: str, table: str = "balance_plans") -> Commit | None:
    """The commit that added ``plan_id``'s first rows to ``table``, None if it has none (tables are
    append-only: the first version holding it, found by bisection over the versions)."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    path, options = _table(root, table), root.delta_options()

    def holds(version: int) -> bool:
        delta = DeltaTable(path, version=version, storage_options=options)
        return delta.to_pyarrow_dataset().count_rows(filter=pc.field("plan_id") == plan_id) > 0

    history = commits(root, table)
    lo, hi = 0, history[0].version
    if not holds(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if holds(mid) else (mid + 1, hi)
    return next(c for c in history if c.version == lo)


def tables_at(root: Storage, at: datetime) -> list[tuple[str, int | None, int]]:
    """(table, version current at ``at`` or None if created later, rows in that version) per table."""
    from deltalake import DeltaTable

    from balancer.delta_versions import version_at
    from balancer.spark.lakehouse import TABLES

    options, result = root.delta_options(), []
    for table in TABLES:
        path = root.join(table)
        if not DeltaTable.is_deltatable(path, storage_options=options):
            continue
        version = version_at(path, at, options)
        if version is None:  # the table came later
            result.append((table, None, 0))
            continue
        delta = DeltaTable(path, version=version, storage_options=options)
        result.append((table, delta.version(), delta.to_pyarrow_dataset().count_rows()))
    return result


def _table(root: Storage, table: str) -> str:
    from deltalake import DeltaTable

    from balancer.spark.lakehouse import TABLES

    if table not in TABLES:
        raise HistoryError(f"unknown table {table!r}; tables: {', '.join(TABLES)}")
    path = root.join(table)
    if not DeltaTable.is_deltatable(path, storage_options=root.delta_options()):
        raise HistoryError(f"no Delta table {table} under {root.root}")
    return path


def run(args: argparse.Namespace, config: Config) -> int:
    root = Storage.of(config.lakehouse.path, config.lakehouse.storage_options)
    if bool(args.table) == bool(args.plan):
        print("balancer history: name a TABLE or --plan PLAN_ID (one of them)", file=sys.stderr)
        return 2
    try:
        if args.table:
            listed = commits(root, args.table)[: args.limit]
            print(f"{'version':>7}  {'committed (UTC)':<24}  {'rows added':>10}  operation")
            for commit in listed:
                added = "" if commit.rows_added is None else str(commit.rows_added)
                print(f"{commit.version:>7}  {stamp(commit.at):<24}  {added:>10}  {commit.operation}")
            return 0
        made = plan_commit(root, args.plan)
        if made is None:
            raise HistoryError(f"plan {args.plan} is not in balance_plans under {root.root}")
        then = tables_at(root, made.at)
        own = {t: plan_commit(root, args.plan, t) for t, _, _ in then if t in PLAN_TABLES[1:]}
    except HistoryError as exc:
        print(f"balancer history: {exc}", file=sys.stderr)
        return 2
    print(f"plan {args.plan}: committed to balance_plans in version {made.version} at {stamp(made.at)}")
    print("every table then:")
    for table, version, rows in then:
        shown = "not created yet" if version is None else f"version {version}, {rows} rows"
        later = own.get(table)
        if later is not None and later.version != version:
            shown += f"; the plan's own rows from version {later.version} at {stamp(later.at)}"
        print(f"  {table:<22} {shown}")
    print(
        f"read them as they were: balancer sql --set lakehouse.path={root.root} "
        f'--as-of {stamp(made.at)} "SELECT ..."'
    )
    return 0
