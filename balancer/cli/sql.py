"""``balancer sql "SELECT …"``: Spark SQL over the lakehouse tables, by name."""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime

from balancer.config import Config
from balancer.resources import sql_files


def register_sql_views(spark) -> list[str]:
    """The saved views in lakehouse/views (each file one CREATE OR REPLACE TEMP VIEW)."""
    names = []
    for path in sql_files("lakehouse", "views"):
        spark.sql(path.read_text())
        names.append(path.name.removesuffix(".sql"))
    return names


def add_parser(subparsers, parents) -> None:
    parser = subparsers.add_parser(
        "sql",
        parents=parents,
        help="query the lakehouse tables with Spark SQL",
        description="Tables: telemetry_raw, telemetry_quarantine, partition_load, broker_load, "
        "broker_ranking, balance_plans, plan_actions, plan_events, plan_batches, plan_outcomes, "
        "quality_runs, consumer_assignments, consumer_lag, consumer_ranking, consumer_groups, "
        "consumer_advice. Views: latest_ranking, plan_history, plan_status, quarantine_reasons, "
        "latest_consumer_ranking, consumer_advice_history.",
    )
    parser.add_argument("query", help='e.g. "SELECT * FROM balance_plans ORDER BY window_end DESC"')
    parser.add_argument("--limit", type=int, default=50, help="rows to print (default 50)")
    parser.add_argument(
        "--as-of",
        type=as_of,
        metavar="VERSION|TIMESTAMP",
        help="read the tables as they were then: an ISO time (2026-11-24T03:10:00Z; what the job "
        "had committed at that moment, for audit), or a version number of the one table the query reads",
    )


def as_of(text: str) -> int | datetime:
    """``--as-of``: a version number, or an ISO-8601 time (UTC when no zone is given)."""
    if text.strip().isdigit():
        return int(text)
    try:
        stamp = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a version number nor an ISO time") from None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def tables_read(query: str, tables: tuple[str, ...]) -> list[str]:
    """The lakehouse ``tables`` that ``query`` names, directly or through a saved view
    (lakehouse/views), in ``tables``' order. Read from the text: a name that only appears in a string
    or as a column counts too, so the answer may hold more tables than the query reads, never fewer."""

    def named(sql: str) -> set[str]:
        return {word.lower() for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql)}

    words = named(query)
    for path in sql_files("lakehouse", "views"):
        if path.name.removesuffix(".sql") in words:
            words |= named(path.read_text())
    return [table for table in tables if table in words]


class AsOfError(ValueError):
    """A ``--as-of`` that cannot say which version of each table the query reads."""


def version_of_one_table(version: int, query: str, tables: tuple[str, ...]) -> str | None:
    """The one table ``query`` reads, which ``--as-of VERSION`` applies to (None when it reads none).

    A version number is per table (each table counts its own commits), so it cannot apply to a query
    that reads several: refused, pointing to the time form, which every table resolves for itself."""
    read = tables_read(query, tables)
    if len(read) > 1:
        raise AsOfError(
            f"--as-of {version} is a version of one table, and each table numbers its own versions, but "
            f"the query reads {len(read)}: {', '.join(read)}; give a time instead (--as-of "
            "2026-11-24T03:10:00Z reads every table as committed then; `balancer history TABLE` lists "
            "a table's versions with their times)"
        )
    return read[0] if read else None


def run(args: argparse.Namespace, config: Config) -> int:
    from balancer.spark.lakehouse import TABLES, Lakehouse
    from balancer.spark.session import build_session, connector_conf

    versioned = None
    if isinstance(args.as_of, int):
        try:
            versioned = version_of_one_table(args.as_of, args.query, TABLES)
        except AsOfError as exc:
            print(f"balancer sql: {exc}", file=sys.stderr)
            return 2
    spark = build_session(
        master="local[*]",
        app_name="balancer-sql",
        conf=connector_conf(config, {**config.spark.conf, "spark.ui.enabled": "false"}),
        short_lived=True,
    )
    lakehouse = Lakehouse(
        spark,
        config.lakehouse.path,
        engine=config.lakehouse.engine,
        storage_options=config.lakehouse.storage_options,
    )
    if isinstance(args.as_of, int):  # the version applies to the one table read; the others are unread
        lakehouse.register_views()
        if versioned is not None:
            lakehouse.read(versioned, as_of=args.as_of).createOrReplaceTempView(versioned)
    else:
        lakehouse.register_views(as_of=args.as_of)
    register_sql_views(spark)
    spark.sql(args.query).show(args.limit, truncate=False)
    return 0
