"""Which JVM packages spark-submit needs for a config (spark-submit.sh; validates the config first)."""

from __future__ import annotations

import sys

from pyspark.version import __version__ as pyspark_version

from balancer.config import ConfigError, load_config

SPARK_SCALA = "2.13"
# The connector must match the Spark that runs the job: the pinned pyspark's version.
SPARK_VERSION = pyspark_version
DELTA_VERSION = "4.4.1"
KAFKA_PACKAGE = f"org.apache.spark:spark-sql-kafka-0-10_{SPARK_SCALA}:{SPARK_VERSION}"
DELTA_PACKAGE = f"io.delta:delta-spark_{SPARK_SCALA}:{DELTA_VERSION}"


def main(argv: list[str]) -> int:
    config_file, overrides, rest = None, [], iter(argv)
    for arg in rest:
        if arg == "--config":
            config_file = next(rest, None)
        elif arg == "--set":
            overrides.append(next(rest, ""))
    try:
        config = load_config(config_file, overrides)
    except ConfigError as exc:
        print(f"balancer: {exc}", file=sys.stderr)
        return 2
    packages = []
    if config.source.connector == "native":
        packages.append(KAFKA_PACKAGE)
    if config.lakehouse.engine == "delta-spark":
        packages.append(DELTA_PACKAGE)
    print(",".join(packages))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
