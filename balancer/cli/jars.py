"""The jars spark-submit.sh passes with --jars for a config (validates the config first).

They come from jvm/lib (`make setup` resolved jvm/pom.xml): nothing downloads when the job starts.
"""

from __future__ import annotations

import sys

from balancer.config import ConfigError, load_config
from balancer.jvm import MissingJarsError, spark_jars, spark_sets


def main(argv: list[str]) -> int:
    config_file, overrides, rest = None, [], iter(argv)
    for arg in rest:
        if arg == "--config":
            config_file = next(rest, None)
        elif arg == "--set":
            overrides.append(next(rest, ""))
    try:
        config = load_config(config_file, overrides)
        print(",".join(spark_jars(spark_sets(config))))
    except ConfigError as exc:
        print(f"balancer: {exc}", file=sys.stderr)
        return 2
    except MissingJarsError as exc:
        print(f"balancer: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
