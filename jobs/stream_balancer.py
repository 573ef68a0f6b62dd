"""Spark entry point for the streaming balancer.

`spark-submit jobs/stream_balancer.py [--once] [--config F] [--set k=v] [--verbose]`

Thin glue: the config is parsed (and rejected) before Spark starts; the job lives in balancer.spark.job.
"""

import sys

from balancer.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]], process=True))
