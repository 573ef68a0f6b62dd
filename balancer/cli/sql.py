"""``balancer sql "SELECT …"``: Spark SQL over the lakehouse tables, by name."""

from __future__ import annotations

import argparse

from balancer.config import Config


def add_parser(subparsers, parents) -> None:
    parser = subparsers.add_parser("sql", parents=parents, help="query the lakehouse tables with Spark SQL")
    parser.add_argument("query", help='e.g. "SELECT * FROM balance_plans ORDER BY window_end DESC"')
    parser.add_argument("--limit", type=int, default=50, help="rows to print (default 50)")


def run(args: argparse.Namespace, config: Config) -> int:
    from balancer.spark.lakehouse import Lakehouse
    from balancer.spark.session import build_session

    spark = build_session(master="local[*]", app_name="balancer-sql",
                          conf={**config.spark.conf, "spark.ui.enabled": "false"})
    lakehouse = Lakehouse(spark, config.lakehouse.path, engine=config.lakehouse.engine)
    lakehouse.register_views()
    spark.sql(args.query).show(args.limit, truncate=False)
    return 0
