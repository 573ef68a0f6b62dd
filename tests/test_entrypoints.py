"""The entry points users run: spark-submit.sh, and the config check that precedes Spark. A whole
submission (``--once`` over a topic, its console and its tables) is tests/test_cluster_path.py's."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from balancer.config import REPO_ROOT


def test_bad_config_stops_spark_submit_before_spark_starts(tmp_path):
    started = time.monotonic()
    result = subprocess.run(
        ["./spark-submit.sh", "--set", "windows.size=banana"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "windows.size" in result.stderr and "banana" in result.stderr
    assert "SparkContext" not in result.stderr and "log4j" not in result.stderr
    assert time.monotonic() - started < 60


def test_cluster_jars_follow_config_and_the_pinned_spark(capsys):
    """spark-submit.sh's --jars: local jars from jvm/lib matching the pinned pyspark, one set per need."""
    from pyspark.version import __version__ as spark_version

    from balancer.cli import jars

    assert jars.main([]) == 0 and capsys.readouterr().out.strip() == ""  # embedded path: no jars
    assert jars.main(["--set", "source.connector=native", "--set", "lakehouse.engine=delta-spark"]) == 0
    wanted = [Path(p) for p in capsys.readouterr().out.strip().split(",")]
    assert all(p.is_file() and p.parent.parent.name == "lib" for p in wanted)
    names = {p.name for p in wanted}
    assert f"spark-sql-kafka-0-10_2.13-{spark_version}.jar" in names
    assert any(n.startswith("delta-spark_4.1_2.13-") for n in names)
    assert not any(n.startswith("hadoop-aws") for n in names)  # s3a only for an s3:// lakehouse
    assert not any(n.startswith(("scala-library", "hadoop-client-api")) for n in names)  # pyspark has them
    assert jars.main(["--set", "lakehouse.engine=delta-spark", "--set", "lakehouse.path=s3a://b/lh"]) == 0
    assert any(Path(p).name.startswith("hadoop-aws-") for p in capsys.readouterr().out.strip().split(","))
    assert jars.main(["--set", "source.connector=jvm"]) == 2
