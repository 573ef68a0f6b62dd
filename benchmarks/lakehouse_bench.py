"""90 days of window closes for one cluster: what a window close reads costs as the lakehouse grows, this
branch beside the baseline's way, in one run.

    make bench-lakehouse                                   # 90 days of hourly windows
    .venv/bin/python benchmarks/lakehouse_bench.py --window-minutes 5   # the job's default: 12x the files
    .venv/bin/python benchmarks/lakehouse_bench.py --days 10 --measure 1,5,10   # a quick look
    .venv/bin/python benchmarks/lakehouse_bench.py --engine delta-spark   # the cluster path's reads

Two lakehouses get the same history, window by window, as the job writes it: per window
(``--window-minutes``, default 60 so that 90 days are built in minutes on two shared cores; the job's
default 5 makes 12x the files, which only steepens the baseline's growth) one file each in telemetry_raw
(the window's reports of a cluster of ``--brokers`` brokers and ``--partitions`` partitions, RF 3),
cluster_metadata (``--isr-changes`` partitions whose in-sync replicas changed), balance_plans (once a day
a proposed plan) and quality_runs (ingest and window runs). The parquet files are written once and
hard-linked into both; a day's files are committed to each table in one Delta commit (the job commits
each micro-batch: its log has more commits, which Delta checkpoints bound in both lakehouses alike).

- ``baseline``: nothing compacted; the Cruise Control path reads cluster_metadata and broker_metadata
  whole at every close (what main does).
- ``this branch``: the job's ``Compactor`` compacts every table once a simulated day (the job's default is
  every hour of wall time: more often, so this is the slower case); cluster_metadata and broker_metadata
  come through ``TopologySlice``, which reads only what was committed since the previous close.

At each measured day the reads of one window close are timed on both (best of ``--repeats``, each
after one untimed warm-up close): telemetry_raw's window (``read_range`` and a count), the topology in
force at the window's end (``cc_loads.topology_at`` / ``brokers_at``, counted), the plan tables
(``tracking.read_latest``, ``tracking.stored_infos``) and the failed ingest runs (``QualityRuns``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from balancer.spark.lakehouse import Lakehouse, arrow_schema
from balancer.spark.lakehouse.parquet import write_parquet

CLUSTER = "bench-1"
WINDOW = timedelta(minutes=60)  # set from --window-minutes
START = datetime(2026, 1, 1, tzinfo=UTC)
WRITTEN = ("telemetry_raw", "cluster_metadata", "broker_metadata", "balance_plans", "quality_runs")


class History:
    """The rows the job would write per window, as Arrow tables."""

    def __init__(self, brokers: int, partitions: int, isr_changes: int):
        self.brokers = brokers
        self.partitions = partitions
        self.isr_changes = isr_changes
        self.replicas = [[(p + k) % brokers for k in range(3)] for p in range(partitions)]

    def telemetry(self, end: datetime, offset: int) -> pa.Table:
        ts = end - timedelta(minutes=1)
        rows = [
            {
                "kafka_topic": "metrics",
                "kafka_partition": 0,
                "kafka_offset": offset + i,
                "v": 1,
                "type": "partition",
                "ts": ts,
                "cluster": CLUSTER,
                "broker": b,
                "topic": "t",
                "partition": p,
                "leader": b == reps[0],
                "replicas": reps,
                "bytes_in": 1e6,
                "bytes_out": 2e6,
                "size": 1e9,
                "is_late": False,
                "batch_id": offset,
            }
            for i, (p, reps, b) in enumerate(
                (p, reps, b) for p, reps in enumerate(self.replicas) for b in reps
            )
        ]
        return pa.Table.from_pylist(rows, schema=arrow_schema("telemetry_raw"))

    def topology(self, at: datetime, window: int) -> pa.Table:
        every = window == 0
        changed = (
            range(self.partitions)
            if every
            else [(window * 7 + k) % self.partitions for k in range(self.isr_changes)]
        )
        rows = [
            {
                "cluster": CLUSTER,
                "observed_at": at,
                "topic": "t",
                "partition": p,
                "replicas": self.replicas[p],
                "leader": self.replicas[p][0],
                "isr": self.replicas[p] if every or window % 2 else self.replicas[p][:2],
            }
            for p in changed
        ]
        return pa.Table.from_pylist(rows, schema=arrow_schema("cluster_metadata"))

    def brokers_rows(self, at: datetime) -> pa.Table:
        rows = [
            {"cluster": CLUSTER, "observed_at": at, "broker": b, "rack": f"r{b % 3}", "present": True}
            for b in range(self.brokers)
        ]
        return pa.Table.from_pylist(rows, schema=arrow_schema("broker_metadata"))

    @staticmethod
    def plan(end: datetime, window: int, proposed: bool) -> pa.Table:
        row = {
            "plan_id": f"plan-{window}",
            "cluster": CLUSTER,
            "created_at": end,
            "window_start": end - WINDOW,
            "window_end": end,
            "status": "proposed" if proposed else "balanced",
            "imbalance_before": 1.2,
            "imbalance_after": 1.05,
            "unmet_goals": [],
            "advice": "move_replicas" if proposed else "no_action",
        }
        return pa.Table.from_pylist([row], schema=arrow_schema("balance_plans"))

    @staticmethod
    def quality(end: datetime, window: int) -> pa.Table:
        rows = [
            {
                "run_id": f"{query}-{window}",
                "query": query,
                "batch_id": window,
                "cluster": CLUSTER,
                "window_start": end - WINDOW,
                "window_end": end,
                "suite": query,
                "success": True,
                "checked_at": end,
            }
            for query in ("ingest", "windows")
        ]
        return pa.Table.from_pylist(rows, schema=arrow_schema("quality_runs"))


def build_day(roots: list[Path], history: History, day: int, per_day: int) -> None:
    """One day of windows: per table, every window's file written once, linked into each lakehouse, and
    committed there in one commit."""
    staged: dict[str, list] = {t: [] for t in WRITTEN}
    first = roots[0]
    for w in range(day * per_day, (day + 1) * per_day):
        end = START + WINDOW * (w + 1)
        pieces = {
            "telemetry_raw": history.telemetry(end, w * 10_000),
            "cluster_metadata": history.topology(end - timedelta(seconds=30), w),
            "balance_plans": history.plan(end, w, proposed=w % per_day == 0),
            "quality_runs": history.quality(end, w),
        }
        if w == 0:
            pieces["broker_metadata"] = history.brokers_rows(end - timedelta(seconds=30))
        for table, rows in pieces.items():
            if rows.num_rows:
                meta = write_parquet(iter(rows.to_batches()), str(first / table), rows.schema, f"w{w}")
                if meta is not None:
                    staged[table].append(meta)
    for table, metas in staged.items():
        if not metas:
            continue
        for root in roots[1:]:
            for meta in metas:
                os.link(first / table / meta.path, root / table / meta.path)
        for root in roots:
            DeltaTable(str(root / table)).create_write_transaction(
                [m.add_action() for m in metas], mode="append", schema=arrow_schema(table)
            )


def close_reads(spark, lakehouse: Lakehouse, end_ms: int, slices) -> dict[str, float]:
    """Seconds per read of one window close ending at ``end_ms`` (the window before it closed last)."""
    from pyspark.sql import functions as F

    from balancer.spark.contract.quality_runs import QualityRuns
    from balancer.spark.track import tracking
    from balancer.spark.windows import cc_loads

    size_ms = int(WINDOW.total_seconds() * 1000)
    out = {}
    start = time.perf_counter()
    lakehouse.read_range("telemetry_raw", "ts", end_ms - size_ms, end_ms).count()
    out["telemetry_raw window"] = time.perf_counter() - start

    start = time.perf_counter()
    window = spark.createDataFrame(
        [
            (
                CLUSTER,
                datetime.fromtimestamp((end_ms - size_ms) / 1000, UTC),
                datetime.fromtimestamp(end_ms / 1000, UTC),
            )
        ],
        "cluster string, window_start timestamp, window_end timestamp",
    )
    if slices is None:  # the baseline: the whole tables at every close
        metadata = lakehouse.read("cluster_metadata").where(F.col("cluster") == CLUSTER)
        brokers = lakehouse.read("broker_metadata").where(F.col("cluster") == CLUSTER)
    else:
        metadata, brokers = (s.frame(spark) for s in slices)
        for s in slices:
            s.closed(end_ms)
    cc_loads.topology_at(metadata, window).count()
    cc_loads.brokers_at(brokers, window).count()
    out["topology at the window's end"] = time.perf_counter() - start

    start = time.perf_counter()
    tracking.read_latest(lakehouse, end_ms)
    tracking.stored_infos(lakehouse, end_ms - size_ms, end_ms)
    out["plan tables"] = time.perf_counter() - start

    start = time.perf_counter()
    QualityRuns(lakehouse).failed_ingest(end_ms - size_ms, end_ms, [CLUSTER])
    out["quality_runs"] = time.perf_counter() - start
    return out


def files(root: Path) -> int:
    return sum(len(DeltaTable(str(root / t)).file_uris()) for t in WRITTEN)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--measure", default="1,30,60,90", help="days after which a close is timed")
    parser.add_argument("--brokers", type=int, default=6)
    parser.add_argument("--partitions", type=int, default=30)
    parser.add_argument("--isr-changes", type=int, default=3, help="partitions whose ISR changes per window")
    parser.add_argument("--window-minutes", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--engine",
        choices=("delta-rs", "delta-spark"),
        default="delta-rs",
        help="what reads and compacts both lakehouses (the tables are written alike either way)",
    )
    args = parser.parse_args(argv)
    global WINDOW
    WINDOW = timedelta(minutes=args.window_minutes)
    measure = sorted({int(d) for d in args.measure.split(",") if 0 < int(d) <= args.days})

    from balancer.config import load_config
    from balancer.spark.lakehouse import Compactor
    from balancer.spark.land.topology import TopologySlice
    from balancer.spark.session import build_session, connector_conf

    # The job's own Spark settings (its spark.sql.shuffle.partitions included), and the engine's jars.
    config = load_config(None, [f"lakehouse.engine={args.engine}"])
    conf = connector_conf(config, {**config.spark.conf, "spark.ui.enabled": "false"})
    spark = build_session(master="local[2]", app_name="lakehouse-bench", conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-bench-"))
    try:
        roots = [tmp / "baseline", tmp / "branch"]
        houses = [Lakehouse(spark, str(r), engine=args.engine) for r in roots]
        for house in houses:
            house.create_all()
        # The job's compactor, on a simulated day's schedule: due whenever the clock says so.
        compactor = Compactor(houses[1], interval=1.0, clock=lambda: time.monotonic() + 1e9)
        compactor.last = float("-inf")
        slices = [
            TopologySlice(houses[1], "cluster_metadata", ("topic", "partition"), CLUSTER),
            TopologySlice(houses[1], "broker_metadata", ("broker",), CLUSTER),
        ]
        history = History(args.brokers, args.partitions, args.isr_changes)
        per_day = int(timedelta(days=1) / WINDOW)
        print(
            f"one cluster, {args.brokers} brokers, {args.partitions} partitions (RF 3), {per_day} windows a "
            f"day, {args.days} days; read and compacted by {args.engine}; load average "
            f"{os.getloadavg()[0]:.2f}",
            flush=True,
        )
        print(
            f"{'day':>4} {'windows':>8} {'files base/branch':>18}  {'baseline ms':>12} {'branch ms':>10}  "
            "per read (baseline / branch ms)",
            flush=True,
        )
        started = time.perf_counter()
        for day in range(args.days):
            build_day(roots, history, day, per_day)
            compactor.maybe_run()
            if day + 1 not in measure:
                continue
            windows = (day + 1) * per_day
            end_ms = int((START + WINDOW * windows).timestamp() * 1000)
            size_ms = int(WINDOW.total_seconds() * 1000)
            best: list[dict[str, float]] = []
            for house, sliced in ((houses[0], None), (houses[1], slices)):
                close_reads(spark, house, end_ms - size_ms, sliced)  # warm-up: the previous window's close
                runs = [close_reads(spark, house, end_ms, sliced) for _ in range(args.repeats)]
                best.append({k: min(r[k] for r in runs) for k in runs[0]})
            base, branch = (sum(b.values()) * 1000 for b in best)
            parts = ", ".join(f"{k} {best[0][k] * 1000:.0f}/{best[1][k] * 1000:.0f}" for k in best[0])
            print(
                f"{day + 1:>4} {windows:>8} {files(roots[0]):>8}/{files(roots[1]):<9}  "
                f"{base:>12.0f} {branch:>10.0f}  {parts}",
                flush=True,
            )
        print(
            f"built and measured in {time.perf_counter() - started:.0f} s; "
            f"load average {os.getloadavg()[0]:.2f}",
            flush=True,
        )
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
