"""Data contract cost per micro-batch: ``Contract.check_ingest`` and ``check_windows`` on a realistic batch.

    .venv/bin/python benchmarks/quality_bench.py                 # old (git rev) vs current, healthy + failing
    .venv/bin/python benchmarks/quality_bench.py --only new      # the current quality.py only
    .venv/bin/python benchmarks/quality_bench.py --topics 30     # a small batch (~13k records), quick

Setup (not timed): one telemetry round of a 270-broker cluster (``ScenarioSpec`` as in
``ingest_bench.py --quick``: 300 topics, ~128k records, one per replica plus one per broker),
parsed with ``parse_telemetry`` and persisted, as the sink does; the replica windows of two
earlier rounds (1-minute windows, ``loads.replica_windows``) and their ``partition_load``,
persisted. Each implementation gets its own delta-rs lakehouse.

Two scenarios: ``healthy`` (the usual case: everything passes) and ``failing`` (10% of the
batch's records broken, so the cluster's quarantine share fails; broker 1 silent in the
second window, so that window is blocked). Per call: wall seconds (median of ``--runs``) and
the number of Spark jobs it started (job ids of a job group set around the call, from
``statusTracker``). The old implementation is ``balancer/spark/contract/quality.py`` and its suites at
``--baseline`` (a git revision), loaded from ``git show``; runs of old and new alternate.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import inspect
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
ROOT = Path(__file__).resolve().parents[1]

from pyspark import StorageLevel  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from balancer import telemetry as tm  # noqa: E402
from balancer.config import load_config  # noqa: E402
from balancer.demo.scenarios import ScenarioSpec, generate  # noqa: E402
from balancer.demo.simulator import SimulatedCluster  # noqa: E402
from balancer.spark.ingest import parse  # noqa: E402
from balancer.spark.lakehouse import Lakehouse  # noqa: E402
from balancer.spark.session import build_session  # noqa: E402
from balancer.spark.windows import loads  # noqa: E402

MINUTE_MS = 60_000
T0 = 1_790_000_000_000 // 300_000 * 300_000
SPEC = dict(
    brokers=270,
    racks=6,
    topics=300,
    partitions_per_topic=(16, 272),
    total_bytes_in=5e9,
    skew=1.2,
    seed=106,
    cluster="bench-270",
)
SILENT = 1
BASELINE = "af2094f"  # the last commit before the one-aggregation contract


def loadavg() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def old_module(rev: str, workdir: Path):
    """quality.py and its suites as of ``rev``, importable beside the current one."""

    def show(path: str) -> str:
        return subprocess.run(
            ["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout

    folder = workdir / f"quality_{rev}"
    (folder / "expectations").mkdir(parents=True)
    for name in ("telemetry_v1", "windows_v1"):
        (folder / "expectations" / f"{name}.json").write_text(show(f"lakehouse/expectations/{name}.json"))
    source = folder / "quality_old.py"
    source.write_text(show("balancer/spark/quality.py"))
    # The revision imports the stages by their flat paths of then (balancer/spark/loads.py).
    sys.modules.setdefault("balancer.spark.loads", loads)
    spec = importlib.util.spec_from_file_location(f"quality_{rev}", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.EXPECTATIONS_DIR = folder / "expectations"
    module.suite_json.cache_clear()
    return module


def kafka_frame(spark, records: list[dict]):
    rows = [
        (f"{r['cluster']}/{r['broker']}".encode(), tm.encode(r), "metrics", 0, i, None)
        for i, r in enumerate(records)
    ]
    return spark.createDataFrame(
        rows, "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"
    )


def replica_windows(valid, config):
    # The signature gained the closed-window range when windows moved to a batch query.
    if "ends_until_ms" in inspect.signature(loads.replica_windows).parameters:
        return loads.replica_windows(
            valid, config.windows, ends_after_ms=None, ends_until_ms=T0 + 10 * MINUTE_MS
        )
    return loads.replica_windows(valid, config.windows)


def scenario(spark, config, cluster: SimulatedCluster, failing: bool, batch_id: int):
    """(parsed, valid, windows, partitions), all persisted and materialized as the sink leaves them."""
    # Windows [T0, T0+1m) and [T0+1m, T0+2m) from two rounds; the ingest batch is the round at T0+2m
    # whose records close them, so the ingest contract has checked up to their end.
    earlier = cluster.telemetry(T0)
    if failing:
        cluster.silent_brokers.add(SILENT)
    earlier += cluster.telemetry(T0 + MINUTE_MS)
    cluster.silent_brokers.discard(SILENT)
    current = cluster.telemetry(T0 + 2 * MINUTE_MS)
    if failing:
        current = [
            {**r, "bytes_in": -1.0} if r["type"] == "partition" and i % 10 == 0 else r
            for i, r in enumerate(current)
        ]
    parsed = parse.parse_telemetry(
        kafka_frame(spark, current).repartition(2), max_value_bytes=65536, max_rate=1e13, max_size=1e15
    ).persist(StorageLevel.MEMORY_AND_DISK)
    now = F.lit(datetime.now(UTC)).cast("timestamp")
    valid = parse.valid_records(parsed).select(
        "*",
        F.lit(False).alias("is_late"),
        F.lit(batch_id).cast("long").alias("batch_id"),
        now.alias("ingested_at"),
    )
    history = parse.valid_records(
        parse.parse_telemetry(
            kafka_frame(spark, earlier).repartition(2), max_value_bytes=65536, max_rate=1e13, max_size=1e15
        )
    )
    windows = replica_windows(history, config).persist(StorageLevel.MEMORY_AND_DISK)
    partitions = loads.partition_load(windows).persist(StorageLevel.MEMORY_AND_DISK)
    counts = (parsed.count(), windows.count(), partitions.count())
    return parsed, valid, windows, partitions, counts


def measure(spark, label: str, call):
    sc = spark.sparkContext
    group = f"bench-{label}-{time.monotonic_ns()}"
    sc.setJobGroup(group, label)
    try:
        started = time.perf_counter()
        result = call()
        seconds = time.perf_counter() - started
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return seconds, len(sc.statusTracker().getJobIdsForGroup(group)), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=SPEC["topics"], help="topics of the 270-broker cluster")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", default=BASELINE, help="git revision of the old quality.py")
    parser.add_argument("--only", choices=["old", "new"], help="measure one implementation")
    parser.add_argument("--scenarios", default="healthy,failing")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="quality-bench-"))
    from balancer.spark.contract import quality as new

    impls = {}
    if args.only != "new":
        impls[f"old ({args.baseline})"] = old_module(args.baseline, workdir)
    if args.only != "old":
        impls["new"] = new
    spark = build_session(
        master="local[2]",
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g"},
    )
    config = load_config(
        None, ["windows.size=1 minute", "windows.slide=1 minute", "windows.watermark=1 minute"]
    )
    contracts = {}
    for i, (name, module) in enumerate(impls.items()):
        lakehouse = Lakehouse(spark, workdir / f"lakehouse{i}", engine="delta-rs")
        lakehouse.create_all()
        quality = config.quality
        if module is not new:  # the old contract still had a wait for a concurrent ingest query
            quality = SimpleNamespace(**quality.model_dump(), ingest_wait="5 seconds")
        contracts[name] = module.Contract(lakehouse, quality)
    cluster = SimulatedCluster(generate(ScenarioSpec(**{**SPEC, "topics": args.topics})), noise=0.03, seed=1)
    print(f"quality bench: 270 brokers, {args.topics} topics, local[2], load average {loadavg()}")

    batch_id = 0
    table = []
    for failing in [s == "failing" for s in args.scenarios.split(",")]:
        setup = time.perf_counter()
        parsed, valid, windows, partitions, counts = scenario(spark, config, cluster, failing, batch_id)
        kind = "failing" if failing else "healthy"
        print(
            f"\n{kind}: batch of {counts[0]:,} records, {counts[1]:,} window rows, {counts[2]:,} partition "
            f"windows (setup {time.perf_counter() - setup:.0f} s, load average {loadavg()})"
        )
        times = {(name, call): [] for name in contracts for call in ("ingest", "windows")}
        jobs = dict.fromkeys(times, 0)
        outcome = {}
        for run in range(args.runs + 1):  # run 0 warms up (GX import and context, JIT)
            batch_id += 1
            for name, contract in contracts.items():
                t, j, rows = measure(
                    spark,
                    f"{name}-ingest",
                    functools.partial(
                        contract.check_ingest, parsed, valid, app_id="bench", batch_id=batch_id
                    ),
                )
                t2, j2, blocked = measure(
                    spark,
                    f"{name}-windows",
                    functools.partial(
                        contract.check_windows, windows, partitions, app_id="bench", batch_id=batch_id
                    ),
                )
                blocked_rows = sorted(tuple(r) for r in blocked.collect()) if blocked is not None else []
                outcome[name] = (
                    [(r["cluster"], r["success"], r["failed_expectations"]) for r in rows],
                    blocked_rows,
                )
                if run:
                    times[(name, "ingest")].append(t)
                    times[(name, "windows")].append(t2)
                    jobs[(name, "ingest")], jobs[(name, "windows")] = j, j2
                print(
                    f"  run {run}{' (warm-up)' if not run else ''} {name:<14} ingest {t:6.2f} s {j:3d} jobs"
                    f"   windows {t2:6.2f} s {j2:3d} jobs   load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        for name, (ingest_rows, blocked_rows) in outcome.items():
            print(f"  {name}: ingest {ingest_rows}")
            print(f"  {name}: blocked {[(c, str(e), r[:160]) for c, _, e, r in blocked_rows]}")
        if len(outcome) == 2:
            (a_ingest, a_blocked), (b_ingest, b_blocked) = outcome.values()
            same = [(c, s) for c, s, _ in a_ingest] == [(c, s) for c, s, _ in b_ingest] and [
                r[:3] for r in a_blocked
            ] == [r[:3] for r in b_blocked]
            print(
                f"  same verdicts (clusters passed/failed, windows blocked): {same}; "
                f"same texts (failed_expectations, blocked reasons): "
                f"{a_ingest == b_ingest and a_blocked == b_blocked}"
            )
        for (name, call), values in times.items():
            table.append((kind, call, name, statistics.median(values), jobs[(name, call)]))
        for frame in (partitions, windows, parsed):
            frame.unpersist()

    print("\n| scenario | call | implementation | median s | Spark jobs |\n|---|---|---|---|---|")
    for kind, call, name, seconds, n in table:
        print(f"| {kind} | {call} | {name} | {seconds:.2f} | {n} |")
    print(f"\nload average at the end: {loadavg()}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
