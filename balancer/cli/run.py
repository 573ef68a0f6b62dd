"""``balancer run [--once]``: the streaming job (what spark-submit.sh submits via jobs/stream_balancer.py)."""

from __future__ import annotations

import argparse
import os

from balancer.config import Config


def add_parser(subparsers, parents) -> None:
    parser = subparsers.add_parser("run", parents=parents, help="run the streaming balancer job")
    parser.add_argument("--once", action="store_true", help="process what is in the topic now, then exit")
    parser.add_argument(
        "--master", help="Spark master (default: spark.master from config, or spark-submit's)"
    )


def run(args: argparse.Namespace, config: Config) -> int:
    from balancer.spark import job
    from balancer.spark.session import build_session, connector_conf

    # Under spark-submit the master is spark-submit's to choose (PythonRunner sets the gateway port).
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    spark = build_session(
        master=args.master or (None if submitted else config.spark.master),
        app_name=config.spark.app_name,
        conf=connector_conf(config, config.spark.conf),
    )
    job.run(spark, config, once=args.once)
    return 0
