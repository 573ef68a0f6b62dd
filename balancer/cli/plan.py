"""``balancer plan SNAPSHOT.json -o PLAN.json [--election-out ELECT.json]``: plan from a snapshot file.

Writes Kafka's reassignment JSON (``kafka-reassign-partitions.sh --execute``) and, optionally,
the preferred-election JSON (``kafka-leader-election.sh``), then prints the plan's summary.
Options come from ``config.balancer`` (``--config`` / ``--set balancer.x=y``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from balancer.planner import PlannerOptions, SnapshotError, plan


def add_parser(subparsers, parents=()) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "plan", parents=list(parents), help="plan leadership transfers and replica moves from a snapshot JSON"
    )
    parser.add_argument(
        "snapshot", metavar="SNAPSHOT.json", help="cluster snapshot (brokers, partitions, loads)"
    )
    parser.add_argument(
        "-o", "--output", metavar="PLAN.json", required=True, help="where to write the reassignment JSON"
    )
    parser.add_argument(
        "--election-out", metavar="ELECT.json", help="where to write the preferred leader election JSON"
    )
    parser.add_argument(
        "--drain",
        metavar="IDS",
        type=_broker_ids,
        default=(),
        help="comma-separated broker ids to empty (decommission), e.g. 7,8; added to balancer.drain_brokers",
    )
    return parser


def _broker_ids(text: str) -> tuple[int, ...]:
    try:
        ids = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--drain takes comma-separated broker ids, got {text!r}") from None
    if not ids or any(b < 0 for b in ids):
        raise argparse.ArgumentTypeError(f"--drain takes comma-separated broker ids >= 0, got {text!r}")
    return ids


def _write(path: str, payload: dict) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n")
    tmp.replace(target)  # never leave a half-written plan for an operator to execute


def run(args: argparse.Namespace, config) -> int:
    try:
        snapshot = json.loads(Path(args.snapshot).read_text())
    except FileNotFoundError:
        print(f"balancer plan: snapshot file not found: {args.snapshot}", file=sys.stderr)
        return 2
    except json.JSONDecodeError as exc:
        print(f"balancer plan: {args.snapshot} is not valid JSON: {exc}", file=sys.stderr)
        return 2
    try:
        options = PlannerOptions.from_config(config.balancer)
        drain = getattr(args, "drain", ())
        if drain:
            options = dataclasses.replace(options, drain_brokers=options.drain_brokers + tuple(drain))
            brokers = snapshot.get("brokers") if isinstance(snapshot, dict) else None
            known = {b.get("id") for b in brokers or () if isinstance(b, dict)}
            unknown = sorted(set(drain) - known)
            if unknown:
                print(f"balancer plan: --drain: broker(s) {unknown} not in {args.snapshot}", file=sys.stderr)
                return 2
        result = plan(snapshot, options)
    except (SnapshotError, ValueError) as exc:
        print(f"balancer plan: {args.snapshot}: {exc}", file=sys.stderr)
        return 2
    _write(args.output, result.to_reassignment())
    if args.election_out:
        _write(args.election_out, result.to_election())
    print(result.summary())
    return 0
