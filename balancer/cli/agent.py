"""``balancer agent``: measure every broker each interval, publish to the metrics topic (balancer.agent)."""

from __future__ import annotations

import argparse
import logging
import sys

from balancer.config import Config


def add_parser(subparsers, parents) -> None:
    parser = subparsers.add_parser(
        "agent", parents=parents, help="measure the cluster's brokers and publish to the metrics topic"
    )
    parser.add_argument(
        "--intervals", type=int, help="stop after this many intervals (default: run until stopped)"
    )


def run(args: argparse.Namespace, config: Config) -> int:
    from balancer.agent.runner import Agent

    if args.intervals is not None and args.intervals < 1:
        raise ValueError(f"--intervals: expected an integer >= 1, got {args.intervals}")
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger = logging.getLogger("balancer.agent")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    agent = Agent(config)
    a = config.agent
    print(
        f"balancer agent: {a.source} source, {a.format} records to {config.source.topic} "
        f"on {config.source.bootstrap_servers}, every {a.interval}"
    )
    try:
        totals = agent.run(args.intervals)
    except KeyboardInterrupt:
        totals = agent.totals
    finally:
        agent.stop()
    print(
        f"balancer agent: {totals.ticks} intervals, {totals.published} records, {totals.gaps} gaps, "
        f"{agent.source.unmapped.total()} unmapped, "
        f"{sum(totals.rejected.values())} impossible figures withheld, "
        f"{totals.cpu_s:.2f}s CPU"
    )
    return 0
