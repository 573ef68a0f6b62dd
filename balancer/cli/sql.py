"""``balancer sql "SELECT …"``: Spark SQL over the lakehouse tables, by name."""

from __future__ import annotations

import argparse
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
        help="read every table as it was then: an ISO time (2026-11-24T03:10:00Z; what the job "
        "had committed at that moment, for audit) or a table version number",
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


def run(args: argparse.Namespace, config: Config) -> int:
    from balancer.spark.lakehouse import Lakehouse
    from balancer.spark.session import build_session

    spark = build_session(
        master="local[*]", app_name="balancer-sql", conf={**config.spark.conf, "spark.ui.enabled": "false"}
    )
    lakehouse = Lakehouse(
        spark,
        config.lakehouse.path,
        engine=config.lakehouse.engine,
        storage_options=config.lakehouse.storage_options,
    )
    lakehouse.register_views(as_of=args.as_of)
    register_sql_views(spark)
    spark.sql(args.query).show(args.limit, truncate=False)
    return 0
