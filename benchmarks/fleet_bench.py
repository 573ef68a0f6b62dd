"""Fleet planning on a Spark standalone cluster: one worker, then two, in the same run.

    .venv/bin/python benchmarks/fleet_bench.py                 # 16 clusters of 50k-100k replicas
    .venv/bin/python benchmarks/fleet_bench.py --clusters 4 --max-replicas 20000   # a quick look

A fleet of Kafka clusters is planned the way the job plans a micro-batch's closed windows:
``balancer.spark.planning.plans`` over partition_load / broker_load rows, one ``applyInPandas``
group per (cluster, window), i.e. per cluster here, run on the executors. The rows are built once
(``planning_bench.cluster_frames``: a window of each cluster as the job hands it over) and written
as parquet; each measurement is a separate application (its own driver process) on a fresh
standalone cluster of loopback workers with ``--cores`` each (default 1: this machine has two
cores, so one 1-core worker against two is the comparison it can make honestly). The inputs are
cached and counted before timing; ``plans(...).collect()`` is then timed ``--repeats`` times (the
first run includes starting the Python workers). Reported: wall seconds per run, and the ratio of
the best one-worker time to the best two-worker time; and per run each executor's task time
(Spark's REST API, ``totalDuration``) and each worker's CPU seconds (its process tree in /proc:
worker, executor JVM, Python workers). The machine may be shared: wall time then mostly measures
the other load, and the CPU ratio (one worker's CPU / the busiest of two workers' CPU) is the speed-up
the same work would get on dedicated cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def build_fleet(out: Path, clusters: int, min_replicas: int, max_replicas: int, seed: int) -> dict:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq
    from planning_bench import cluster_frames

    from balancer.demo.scenarios import ScenarioSpec, generate

    rng = np.random.default_rng(seed)
    parts, brokers, sizes = [], [], []
    for i in range(clusters):
        replicas = int(rng.integers(min_replicas, max_replicas + 1))
        rf = 3
        n_brokers = int(rng.integers(24, 61))
        topics = max(10, replicas // rf // 400)
        per_topic = max(1, replicas // rf // topics)
        spec = ScenarioSpec(
            brokers=n_brokers,
            racks=3,
            topics=topics,
            partitions_per_topic=(per_topic, per_topic),
            replication_factor=rf,
            new_empty_brokers=2,
            seed=seed + i,
            cluster=f"fleet-{i:02d}",
        )
        snapshot = generate(spec)
        _, prows, brows = cluster_frames(snapshot, noise=0.03, seed=seed + i)
        prows["replicas"] = prows["replicas"].map(lambda r: r.tolist())
        parts.append(prows)
        brokers.append(brows.drop(columns=["_blocked"]))
        sizes.append(int(prows["replication_factor"].sum()))
    out.mkdir(parents=True, exist_ok=True)
    for name, frames in (("partitions", parts), ("brokers", brokers)):
        table = pa.Table.from_pandas(pd.concat(frames, ignore_index=True), preserve_index=False)
        # The job's types: timestamps in UTC microseconds, replicas ARRAY<INT>.
        table = table.cast(
            pa.schema(
                [
                    f.with_type(pa.timestamp("us", tz="UTC"))
                    if pa.types.is_timestamp(f.type)
                    else f.with_type(pa.list_(pa.int32()))
                    if pa.types.is_list(f.type)
                    else f
                    for f in table.schema
                ]
            )
        )
        pq.write_table(table, out / f"{name}.parquet")
    return {"clusters": clusters, "replicas": sizes}


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds (user + system, with reaped children) of process ``root`` and its descendants: a
    worker with its executor JVM and Python workers (PySpark's daemon starts a process group of its own,
    so the tree is followed by parent pid). On a shared machine this, not wall time, says how much work
    each worker did."""
    ticks, parent = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # the process ended meanwhile
        pid = int(stat.parent.name)
        parent[pid] = int(fields[1])  # fields after the command: state, ppid, pgrp, ...
        ticks[pid] = sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    total = 0
    for pid in ticks:
        node = pid
        while node in parent and node != root and node > 1:
            node = parent[node]
        if node == root:
            total += ticks[pid]
    return total / os.sysconf("SC_CLK_TCK")


def child(args) -> dict:
    """One application on ``args.master``: plan the fleet ``args.repeats`` times."""

    from balancer.config import BalancerConfig
    from balancer.demo.cluster import free_port, get_json
    from balancer.spark import planning
    from balancer.spark.session import build_session

    ui_port = free_port()
    spark = build_session(
        master=args.master,
        app_name=f"fleet-bench-{args.label}",
        conf={
            # The UI's REST API gives each executor's task time (how the work was split).
            "spark.ui.enabled": "true",
            "spark.ui.port": str(ui_port),
            "spark.ui.host": "127.0.0.1",
            "spark.sql.shuffle.partitions": str(args.clusters),
            "spark.executor.memory": args.executor_memory,
            # Plan only once every executor is up, so the two-worker run uses both from the start.
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
        },
    )
    parts = spark.read.parquet(str(Path(args.input) / "partitions.parquet")).cache()
    brokers = spark.read.parquet(str(Path(args.input) / "brokers.parquet")).cache()
    rows = parts.count(), brokers.count()
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
    api = f"http://127.0.0.1:{ui_port}/api/v1/applications/{spark.sparkContext.applicationId}/executors"

    def task_ms() -> dict[str, int]:
        return {e["id"]: e["totalDuration"] for e in get_json(api, timeout=120) if e["id"] != "driver"}

    pgids = [int(g) for g in args.worker_pgids.split(",")]
    times, split, cpu = [], [], []
    for _ in range(args.repeats):
        before = task_ms()
        cpu_before = [tree_cpu_seconds(g) for g in pgids]
        start = time.perf_counter()
        plans = (
            planning.plans(parts, brokers, BalancerConfig())
            .select("cluster", "status", "leader_moves", "replica_moves")
            .collect()
        )
        times.append(time.perf_counter() - start)
        after = task_ms()
        split.append(sorted(round((after[k] - before.get(k, 0)) / 1000, 1) for k in after))
        cpu.append([round(tree_cpu_seconds(g) - c, 1) for g, c in zip(pgids, cpu_before)])
    assert len(plans) == args.clusters, plans
    statuses = sorted({p["status"] for p in plans})
    spark.stop()
    return {
        "label": args.label,
        "executors": executors,
        "rows": rows,
        "seconds": times,
        "task_seconds": split,
        "worker_cpu_seconds": cpu,
        "statuses": statuses,
        "moves": sum((p["leader_moves"] or 0) + (p["replica_moves"] or 0) for p in plans),
    }


def measure(workers: int, args, workdir: Path) -> dict:
    from balancer.demo.cluster import StandaloneCluster

    with StandaloneCluster(
        workdir / f"cluster-{workers}", workers=workers, cores=args.cores, memory=args.worker_memory
    ) as cluster:
        cmd = [
            sys.executable,
            __file__,
            "--child",
            "--master",
            cluster.master_url,
            "--input",
            str(workdir / "fleet"),
            "--label",
            f"{workers}w",
            "--clusters",
            str(args.clusters),
            "--repeats",
            str(args.repeats),
            "--executor-memory",
            args.executor_memory,
            "--worker-pgids",
            ",".join(str(g) for g in cluster.pgids[1:]),
        ]
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
        if done.returncode != 0:
            raise SystemExit(f"child failed:\n{done.stderr[-4000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
    result["workers"] = workers
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", type=int, default=16)
    parser.add_argument("--min-replicas", type=int, default=50_000)
    parser.add_argument("--max-replicas", type=int, default=100_000)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--worker-memory", default="2g")
    parser.add_argument("--executor-memory", default="1536m")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--master", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--label", help=argparse.SUPPRESS)
    parser.add_argument("--worker-pgids", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return 0

    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        workdir = Path(tmp)
        start = time.perf_counter()
        fleet = build_fleet(workdir / "fleet", args.clusters, args.min_replicas, args.max_replicas, args.seed)
        print(
            f"fleet: {fleet['clusters']} clusters, {sum(fleet['replicas']):,} replicas "
            f"({min(fleet['replicas']):,}-{max(fleet['replicas']):,} each), built in "
            f"{time.perf_counter() - start:.1f} s; load average {os.getloadavg()[0]:.2f}",
            flush=True,
        )
        results = []
        for workers in (1, 2):
            result = measure(workers, args, workdir)
            results.append(result)
            print(
                f"{workers} worker(s) x {args.cores} core, {result['executors']} executor(s): plan runs "
                + ", ".join(
                    f"{s:.1f} s (task time per executor {t}, CPU s per worker {c})"
                    for s, t, c in zip(
                        result["seconds"], result["task_seconds"], result["worker_cpu_seconds"]
                    )
                )
                + f"; plans {result['statuses']}, {result['moves']:,} moves; "
                f"load average {os.getloadavg()[0]:.2f}",
                flush=True,
            )
        one, two = min(results[0]["seconds"]), min(results[1]["seconds"])
        print(f"wall, best run: 1 worker {one:.1f} s, 2 workers {two:.1f} s; ratio {one / two:.2f}x")
        # On dedicated cores a CPU-bound run takes as long as its busiest worker's CPU time.
        cpu_one = min(sum(c) for c in results[0]["worker_cpu_seconds"])
        cpu_two = min(max(c) for c in results[1]["worker_cpu_seconds"])
        print(
            f"CPU, best run: 1 worker {cpu_one:.1f} s; 2 workers: busiest worker {cpu_two:.1f} s; "
            f"ratio {cpu_one / cpu_two:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
