"""The cluster path, on three real Apache Kafka brokers: Spark's own Kafka source (``source.connector:
native``) and Delta's Spark connector (``lakehouse.engine: delta-spark``), with the jars `make setup`
resolved into jvm/lib, submitted through spark-submit.sh exactly as an operator submits the job.

The same input (a simulated cluster's telemetry and some poison) must give row for row the same tables on
both connectors and both engines.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from deltalake import DeltaTable
from support import BALANCER, minutes_of, produce, simulated, write_config

from balancer.config import load_config
from balancer.jvm import JarSet, spark_jars
from balancer.spark import job
from balancer.spark.lakehouse import Lakehouse

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

ROOT = Path(__file__).resolve().parent.parent
# Each connector and each engine differs from the other combination in one of the two: native + delta-rs
# and python + delta-spark must give the same rows. The remaining two meet on the standalone cluster
# (tests/test_standalone.py: native + delta-spark on s3a:// against python + delta-rs, the suite's default).
# Each submission costs a minute or more of the suite's two cores.
COMBOS = [("native", "delta-rs"), ("python", "delta-spark")]
POISON = [b"not json", b'{"v":1}garbage', b"\xff\xfe", b'{"v":1,"type":"partition","ts":"soon"}']
# Columns that say when a row was written or name a generated id: they differ between any two runs.
VOLATILE = {
    "plan_id",
    "created_at",
    "ingested_at",
    "quarantined_at",
    "recorded_at",
    "observed_at",
    "checked_at",
}
COMPARED = [
    "telemetry_raw",
    "telemetry_quarantine",
    "partition_load",
    "broker_load",
    "broker_ranking",
    "balance_plans",
    "plan_actions",
    "plan_batches",
]


RESTARTED = "balancer: WARNING the Kafka source's Python process did not connect back to Spark within"


def slow_first_source(folder: Path) -> Path:
    """A Python for Spark's Python processes whose first start of the Python data source's process
    (``python_streaming_source_runner``) sleeps past Spark's fixed 10 s deadline to connect back, as on
    a driver short of CPU; every other start, and every other process, is the venv's Python at once."""
    wrapper = folder / "python"
    wrapper.write_text(
        "#!/bin/sh\n"
        'case "$*" in *python_streaming_source_runner*)\n'
        f'  mkdir "{folder}/source-delayed" 2>/dev/null && sleep 12 ;;\n'
        "esac\n"
        f'exec "{sys.executable}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def submit(config: Path, folder: Path, *, python: Path | None = None) -> subprocess.Popen:
    """``spark-submit.sh --once`` on ``config``: started, its output in files under ``folder``;
    ``python``: the Python of Spark's Python processes (``spark.pyspark.python``)."""
    env = {**os.environ, "BALANCER_LOG_DIR": str(folder / "logs"), "PYSPARK_PYTHON": sys.executable}
    conf = ["--conf", f"spark.pyspark.python={python}"] if python else []
    with open(folder / "stdout", "w") as out, open(folder / "stderr", "w") as err:
        return subprocess.Popen(
            [str(ROOT / "spark-submit.sh"), "--master", "local[2]", *conf, "--once", "--config", str(config)],
            stdout=out,
            stderr=err,
            text=True,
            env=env,
        )


def table_rows(root: Path | str, table: str, storage: dict[str, str] | None = None) -> list[tuple]:
    """``table``'s rows under ``root`` (a folder or an object-store URI), sorted, volatile columns out."""
    frame = DeltaTable(f"{root}/{table}", storage_options=storage).to_pandas()
    frame = frame[[c for c in frame.columns if c not in VOLATILE]]
    return sorted(tuple(repr(v) for v in row) for row in frame.itertuples(index=False))


@pytest.fixture(scope="module")
def runs(kafka, tmp_path_factory):
    """Each combination's lakehouse after one ``--once`` submission over the same topic."""
    topic = "cluster-path"
    kafka.create_topic(topic, partitions=2, replication_factor=3)
    values = minutes_of(simulated(cluster="native"), 0, 6)
    produced = produce(kafka.bootstrap_servers, topic, values[:20] + POISON + values[20:])
    # Both submissions at once: each spends much of its time starting up and committing, so together they
    # take well under the sum of their times alone on two cores.
    folders, jobs, consoles = {}, {}, {}
    for connector, engine in COMBOS:
        folder = folders[(connector, engine)] = tmp_path_factory.mktemp(f"{connector}-{engine}")
        config = write_config(
            folder,
            kafka.bootstrap_servers,
            topic,
            # One landing batch: delta-spark's commits cost seconds each on two shared cores.
            source={"connector": connector, "max_records_per_batch": 100_000},
            lakehouse={"engine": engine},
        )
        # The Python source's first start misses Spark's deadline: the job starts its query again.
        python = slow_first_source(folder) if connector == "python" else None
        jobs[(connector, engine)] = submit(config, folder, python=python)
    started = time.monotonic()
    try:
        for combo, proc in jobs.items():
            code = proc.wait(timeout=max(1.0, 900 - (time.monotonic() - started)))
            output = (folders[combo] / "stdout").read_text(), (folders[combo] / "stderr").read_text()
            assert code == 0, (combo, output[0][-2000:], output[1][-2000:])
            consoles[combo] = (output[0] + output[1]).splitlines()
            print(f"{combo[0]} + {combo[1]}: done after {time.monotonic() - started:.0f} s", file=sys.stderr)
    finally:
        for proc in jobs.values():
            if proc.poll() is None:
                proc.kill()
    lakehouses = {combo: folder / "lakehouse" for combo, folder in folders.items()}
    return produced, lakehouses, consoles


@pytest.mark.beside
def test_every_combination_lands_everything(runs):
    produced, lakehouses, _ = runs
    for combo, root in lakehouses.items():
        raw, bad = (
            DeltaTable(str(root / t)).to_pyarrow_table() for t in ("telemetry_raw", "telemetry_quarantine")
        )
        assert (raw.num_rows, bad.num_rows) == (produced - len(POISON), len(POISON)), combo
        assert DeltaTable(str(root / "balance_plans")).to_pyarrow_table().num_rows >= 1, combo


@pytest.mark.beside
def test_a_submission_prints_the_products_lines_only(runs):
    """spark-submit.sh's console: the log file's path first, then the job's own lines; Spark's and the
    libraries' logs go to that file."""
    *_, consoles = runs
    for combo, console in consoles.items():
        assert re.match(r"logs \(Spark, libraries, traces\): \S*/submit-", console[0]), (combo, console[:3])
        noise = [
            line
            for line in console
            if re.search(r"\b(WARN|WARNING|INFO|ERROR)\b|log4j|py4j", line) and not line.startswith(RESTARTED)
        ]
        assert noise == [], (combo, noise[:5])


@pytest.mark.beside
def test_a_python_source_that_misses_its_start_deadline_is_started_again(runs):
    """The python connector's submission had its source's first process held past Spark's 10 s: the job
    said so once, started the query again and landed everything (the test above), exactly once (the
    rows equal the native connector's)."""
    *_, consoles = runs
    restarts = {combo: sum(line.startswith(RESTARTED) for line in lines) for combo, lines in consoles.items()}
    assert restarts == {("native", "delta-rs"): 0, ("python", "delta-spark"): 1}


@pytest.mark.beside
def test_each_engine_wrote_its_own_tables(runs):
    """delta-spark's commits name Delta-Lake as their engine, delta-rs' do not: the engine was not swapped."""
    _, lakehouses, _ = runs
    for (connector, engine), root in lakehouses.items():
        info = str(DeltaTable(str(root / "telemetry_raw")).history()[0].get("engineInfo", "delta-rs"))
        assert ("Delta-Lake" in info) == (engine == "delta-spark"), (connector, engine, info)


@pytest.mark.beside
@pytest.mark.parametrize("table", COMPARED)
def test_both_connectors_and_engines_give_the_same_rows(runs, table):
    _, lakehouses, _ = runs
    reference = table_rows(lakehouses[COMBOS[0]], table)
    assert reference, f"{table} is empty: nothing to compare"
    for combo in COMBOS[1:]:
        assert table_rows(lakehouses[combo], table) == reference, (table, combo)


@pytest.mark.beside
def test_delta_spark_tables_carry_the_audit_retention(runs):
    _, lakehouses, _ = runs
    for table in ("telemetry_raw", "balance_plans"):
        config = DeltaTable(str(lakehouses[("python", "delta-spark")] / table)).metadata().configuration
        assert config.get("delta.logRetentionDuration") == "interval 365 days", (table, config)
        assert config.get("delta.deletedFileRetentionDuration") == "interval 365 days", (table, config)


def sql_count(root: Path, log_dir: Path, *as_of: str) -> int:
    result = subprocess.run(
        [
            BALANCER,
            "sql",
            "--set",
            f"lakehouse.path={root}",
            "--set",
            "lakehouse.engine=delta-spark",
            *as_of,
            "SELECT count(*) AS n FROM telemetry_raw",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "BALANCER_LOG_DIR": str(log_dir)},
    )
    assert result.returncode == 0, result.stdout[-1000:] + result.stderr[-2000:]
    return int(re.findall(r"^\|\s*(\d+)\s*\|$", result.stdout, re.MULTILINE)[-1])


@pytest.mark.beside
def test_sql_as_of_a_version_reads_delta_spark_tables_through_spark(runs, tmp_path):
    """`balancer sql` on a delta-spark lakehouse loads Delta's jar itself; `--as-of 0` is VERSION AS OF 0
    (the empty table as created), without it the rows landed."""
    produced, lakehouses, _ = runs
    root = lakehouses[("python", "delta-spark")]
    with ThreadPoolExecutor(2) as pool:  # two drivers at once: mostly start-up, which overlaps well
        now = pool.submit(sql_count, root, tmp_path / "now")
        first = pool.submit(sql_count, root, tmp_path / "first", "--as-of", "0")
        assert now.result() == produced - len(POISON)
        assert first.result() == 0


@pytest.mark.beside
def test_auto_picks_delta_spark_when_its_jar_is_loaded(tmp_path):
    """A session started with delta-spark's jars from jvm/lib: `auto` chooses it (without them: delta-rs,
    the in-process tests' session)."""
    jars = ",".join(spark_jars([JarSet.DELTA]))
    script = (
        "from balancer.spark.session import build_session\n"
        "from balancer.spark.lakehouse import Lakehouse\n"
        f"spark = build_session(master='local[1]', conf={{'spark.jars': {jars!r}}})\n"
        f"print('ENGINE', Lakehouse(spark, {str(tmp_path / 'lh')!r}, engine='auto').engine.value)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert "ENGINE delta-spark" in result.stdout, (result.stdout[-1000:], result.stderr[-2000:])


def test_native_connector_without_its_jar_fails_with_a_clear_message(spark, tmp_path):
    """The in-process session has no connector jars: the native connector says how to get them."""
    config = load_config(
        None,
        [
            "source.connector=native",
            f"lakehouse.path={tmp_path / 'lh'}",
            "lakehouse.engine=delta-rs",
            f"checkpoint.path={tmp_path / 'cp'}",
        ],
    )
    with pytest.raises(RuntimeError, match=r"spark-sql-kafka.*or set source\.connector=python"):
        job.start(spark, config, once=True)


def test_delta_spark_engine_without_its_jar_fails_with_a_clear_message(spark, tmp_path):
    with pytest.raises(RuntimeError, match=r"delta-spark.*or set lakehouse\.engine=delta-rs"):
        Lakehouse(spark, tmp_path / "lh", engine="delta-spark")
