"""The delta-spark backend on Delta's own jar (from jvm/lib), in one session of its own in a subprocess (the
tests' shared session has none): the tables' retention properties, and each app's transactions."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from deltalake import DeltaTable

from balancer.spark.lakehouse import TABLES

pytestmark = [pytest.mark.integration, pytest.mark.beside]

AUDIT = {
    "delta.logRetentionDuration": "interval 365 days",
    "delta.deletedFileRetentionDuration": "interval 365 days",
}
WANTED = {**AUDIT, "delta.logRetentionDuration": "interval 400 days"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The lakehouse's root and what the script printed: its tables created with the default properties,
    then with ``WANTED``; two apps' batches appended to quality_runs and what the backend then said."""
    from balancer.jvm import JarSet, spark_jars

    root = tmp_path_factory.mktemp("delta-spark") / "lh"
    jars = ",".join(spark_jars([JarSet.DELTA]))
    script = f"""
import json, sys
import pyarrow as pa
from balancer.spark.lakehouse import Lakehouse
from balancer.spark.lakehouse.tables import arrow_schema
from balancer.spark.session import build_session

spark = build_session(master="local[1]", conf={{"spark.jars": {jars!r}, "spark.ui.enabled": "false"}})
lakehouse = Lakehouse(spark, {str(root)!r}, engine="delta-spark")
lakehouse.create_all()
lakehouse.create_all(dict(zip(sys.argv[1::2], sys.argv[2::2])))
rows = pa.Table.from_pylist([], arrow_schema("quality_runs"))
wrote = [lakehouse.append("quality_runs", rows, app_id="a", batch_id=b) for b in (0, 1)]
wrote += [lakehouse.append("quality_runs", rows, app_id="b", batch_id=b) for b in range(3)]
found = {{app: lakehouse.committed_version("quality_runs", app) for app in ("a", "b", "c")}}
replayed = lakehouse.append("quality_runs", rows, app_id="a", batch_id=1)
landed = lakehouse.append("quality_runs", rows, app_id="a", batch_id=2)
after = lakehouse.committed_version("quality_runs", "a")
print("RESULT", json.dumps(dict(wrote=wrote, found=found, replayed=replayed, landed=landed, after=after)))
"""
    result = subprocess.run(
        [sys.executable, "-c", script, *(x for kv in WANTED.items() for x in kv)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("RESULT "))
    return root, json.loads(line.removeprefix("RESULT "))


def test_delta_spark_tables_get_the_same_properties(run):
    """A delta-spark lakehouse's tables carry the retention properties, and change them when the config
    does."""
    root, _ = run
    for table in TABLES:
        delta = DeltaTable(str(root / table))
        assert delta.metadata().configuration.items() >= WANTED.items(), table


def test_each_apps_latest_batch_is_read_from_the_log_and_a_replayed_batch_writes_nothing(run):
    """Two apps' batches on one table: each app's latest batch is the one the log's transactions record
    for it (an app that never wrote has none), a replayed batch is reported as not written, the next one
    lands. The appends are Delta's jar's own, into a table delta-rs created."""
    root, said = run
    history = DeltaTable(str(root / "quality_runs")).history()
    assert "Delta-Lake" in str(history[0].get("engineInfo")), history[0]
    assert "Delta-Lake" not in str(history[-1].get("engineInfo")), history[-1]
    assert said == {
        "wrote": [True] * 5,
        "found": {"a": 1, "b": 2, "c": None},
        "replayed": False,
        "landed": True,
        "after": 2,
    }
