"""``balancer``: the command line. One small module per subcommand; they share ``--config`` and ``--set``."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from balancer.config import ConfigError, load_config

# Subcommand name → module in balancer.cli with add_parser(subparsers) and run(args, config) -> int.
COMMANDS = ("run", "sql", "plan", "export")


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
    parser = argparse.ArgumentParser(prog="balancer", description="Traffic-aware Kafka balancer")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"balancer.cli.{name}").add_parser(subparsers, parents=[common])
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config, args.overrides)
    except ConfigError as exc:
        print(f"balancer: {exc}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"balancer.cli.{args.command}")
    return module.run(args, config) or 0


if __name__ == "__main__":
    sys.exit(main())
