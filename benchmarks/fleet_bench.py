"""Fleet planning on a Spark standalone cluster: this branch beside a baseline (git ref), in one run.

    make bench-fleet                                  # 64 clusters x 20k replicas, two 1-core workers
    .venv/bin/python benchmarks/fleet_bench.py --workers 1,2          # also one worker against two
    .venv/bin/python benchmarks/fleet_bench.py --clusters 4 --max-replicas 5000 --min-replicas 5000

A fleet of Kafka clusters is planned the way the job plans a micro-batch's closed windows:
``balancer.spark.plan.planning.plans`` over partition_load / broker_load rows, one ``applyInPandas``
group per (cluster, window), i.e. per cluster here, run on the executors: one timed run is one
window of the whole fleet. The rows are built once (``planning_bench.cluster_frames``: a window of
each cluster as the job hands it over) and written as parquet; each worker count is a separate
application (its own driver process) on a fresh standalone cluster of loopback workers with
``--cores`` each, with the job's own Spark settings (``conf/balancer.yaml``: its
``spark.sql.shuffle.partitions`` included). In that application the fleet is planned
``--repeats`` times by this branch's ``planning.plans`` and by the baseline's (``--baseline``, default
8a847c8, the planning before it followed the fleet: its ``balancer/spark/planning.py`` loaded from
git and shipped to the executors by value),
alternating, after one untimed run of each (Python workers started). Reported per implementation and
run: wall seconds, the planning stage's task count, each executor's task time (Spark's REST API,
``totalDuration``) and each worker's CPU seconds (its process tree in /proc: worker, executor JVM,
Python workers). The machine may be shared: wall time then also measures the other load.
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

HERE = Path(__file__).resolve().parent


REPLICAS = 20_000  # per cluster, by default
SEED = 7


def fleet_specs(clusters: int, min_replicas: int = REPLICAS, max_replicas: int = REPLICAS, seed: int = SEED):
    """The fleet's clusters, each a ``ScenarioSpec``: 24-60 brokers and two new empty ones, RF 3 over
    3 racks, ``min_replicas``-``max_replicas`` replicas; cluster ``i`` seeded ``seed + i``. The planner
    benchmark's ``--fleet`` plans the same clusters."""
    import numpy as np

    from balancer.demo.scenarios import ScenarioSpec

    rng = np.random.default_rng(seed)
    specs = []
    for i in range(clusters):
        replicas = int(rng.integers(min_replicas, max_replicas + 1))
        rf = 3
        n_brokers = int(rng.integers(24, 61))
        topics = max(10, replicas // rf // 400)
        per_topic = max(1, replicas // rf // topics)
        specs.append(
            ScenarioSpec(
                brokers=n_brokers,
                racks=3,
                topics=topics,
                partitions_per_topic=(per_topic, per_topic),
                replication_factor=rf,
                new_empty_brokers=2,
                seed=seed + i,
                cluster=f"fleet-{i:02d}",
            )
        )
    return specs


def build_fleet(out: Path, clusters: int, min_replicas: int, max_replicas: int, seed: int) -> dict:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq
    from planning_bench import cluster_frames

    from balancer.demo.scenarios import generate

    parts, brokers, sizes = [], [], []
    for i, spec in enumerate(fleet_specs(clusters, min_replicas, max_replicas, seed)):
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


def load_baseline(ref: str):
    """``balancer/spark/planning.py`` as of git ``ref``, as a module pickled by value to the executors."""
    import importlib
    import types

    from pyspark import cloudpickle

    source = subprocess.run(
        ["git", "show", f"{ref}:balancer/spark/planning.py"],
        cwd=HERE.parent,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # The revision imports the stages by their flat paths of then (balancer/spark/loads.py).
    sys.modules.setdefault("balancer.spark.loads", importlib.import_module("balancer.spark.windows.loads"))
    module = types.ModuleType("planning_baseline")
    module.__file__ = f"{ref}:balancer/spark/planning.py"
    sys.modules[module.__name__] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    cloudpickle.register_pickle_by_value(module)
    return module


def child(args) -> dict:
    """One application on ``args.master``: plan the fleet with each implementation, alternating."""

    from balancer.config import BalancerConfig, load_config
    from balancer.demo.cluster import get_json
    from balancer.demo.ports import free_port
    from balancer.spark.plan import planning
    from balancer.spark.session import build_session

    ui_port = free_port()
    spark = build_session(
        master=args.master,
        app_name=f"fleet-bench-{args.label}",
        conf={
            **load_config(None, []).spark.conf,  # the job's own settings: spark.sql.shuffle.partitions too
            # The UI's REST API gives each executor's task time (how the work was split).
            "spark.ui.enabled": "true",
            "spark.ui.port": str(ui_port),
            "spark.ui.host": "127.0.0.1",
            "spark.executor.memory": args.executor_memory,
            # Plan only once every executor is up, so the two-worker run uses both from the start.
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
        },
    )
    impls = {"this branch": planning}
    if args.baseline:
        impls[f"baseline {args.baseline}"] = load_baseline(args.baseline)
    parts = spark.read.parquet(str(Path(args.input) / "partitions.parquet")).cache()
    brokers = spark.read.parquet(str(Path(args.input) / "brokers.parquet")).cache()
    rows = parts.count(), brokers.count()
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
    base = f"http://127.0.0.1:{ui_port}/api/v1/applications/{spark.sparkContext.applicationId}"

    def task_ms() -> dict[str, int]:
        return {
            e["id"]: e["totalDuration"]
            for e in get_json(f"{base}/executors", timeout=120)
            if e["id"] != "driver"
        }

    def planning_tasks(group: str) -> int:
        """Tasks of the stage that ran the planner (the job group's stage with the most tasks)."""
        jobs = [j for j in get_json(f"{base}/jobs", timeout=120) if j.get("jobGroup") == group]
        stages = {sid for j in jobs for sid in j["stageIds"]}
        counts = [st["numTasks"] for st in get_json(f"{base}/stages", timeout=120) if st["stageId"] in stages]
        return max(counts, default=0)

    pgids = [int(g) for g in args.worker_pgids.split(",")]
    out: dict[str, dict] = {
        name: {"seconds": [], "tasks": [], "task_seconds": [], "worker_cpu_seconds": []} for name in impls
    }
    for run in range(args.repeats + 1):
        for name, module in impls.items():
            group = f"{name}-{run}"
            spark.sparkContext.setJobGroup(group, group)
            before = task_ms()
            cpu_before = [tree_cpu_seconds(g) for g in pgids]
            start = time.perf_counter()
            plans = (
                module.plans(parts, brokers, BalancerConfig())
                .select("cluster", "status", "leader_moves", "replica_moves")
                .collect()
            )
            seconds = time.perf_counter() - start
            assert len(plans) == args.clusters, plans
            if run == 0:
                continue  # Python workers started, the planner imported: not timed
            after = task_ms()
            entry = out[name]
            entry["seconds"].append(seconds)
            entry["tasks"].append(planning_tasks(group))
            entry["task_seconds"].append(
                sorted(round((after[k] - before.get(k, 0)) / 1000, 1) for k in after)
            )
            entry["worker_cpu_seconds"].append(
                [round(tree_cpu_seconds(g) - c, 1) for g, c in zip(pgids, cpu_before)]
            )
            entry["statuses"] = sorted({p["status"] for p in plans})
            entry["moves"] = sum((p["leader_moves"] or 0) + (p["replica_moves"] or 0) for p in plans)
    shuffle_partitions = spark.conf.get("spark.sql.shuffle.partitions")
    spark.stop()
    return {
        "label": args.label,
        "executors": executors,
        "rows": rows,
        "shuffle_partitions": shuffle_partitions,
        "impls": out,
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
            "--baseline",
            args.baseline,
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
    parser.add_argument("--clusters", type=int, default=64)
    parser.add_argument("--min-replicas", type=int, default=REPLICAS)
    parser.add_argument("--max-replicas", type=int, default=REPLICAS)
    parser.add_argument("--workers", default="2", help="worker counts to measure, e.g. 1,2")
    # The planning as it was before it followed the fleet (579661a's parent: one cogroup over
    # spark.sql.shuffle.partitions). main itself now holds this branch's earlier commits.
    parser.add_argument(
        "--baseline", default="8a847c8", help="git ref planned beside this branch ('' for none)"
    )
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--worker-memory", default="2g")
    parser.add_argument("--executor-memory", default="1536m")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=SEED)
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
        for workers in (int(w) for w in args.workers.split(",")):
            result = measure(workers, args, workdir)
            print(
                f"{workers} worker(s) x {args.cores} core, {result['executors']} executor(s), "
                f"spark.sql.shuffle.partitions {result['shuffle_partitions']}:",
                flush=True,
            )
            for name, entry in result["impls"].items():
                runs = "; ".join(
                    f"{s:.1f} s in {n} task(s) (task s per executor {t}, CPU s per worker {c})"
                    for s, n, t, c in zip(
                        entry["seconds"], entry["tasks"], entry["task_seconds"], entry["worker_cpu_seconds"]
                    )
                )
                print(
                    f"  {name:<16} wall per window {min(entry['seconds']):6.1f} s best, "
                    f"{sum(entry['seconds']) / len(entry['seconds']):6.1f} s mean: {runs}; "
                    f"plans {entry['statuses']}, {entry['moves']:,} moves",
                    flush=True,
                )
            if len(result["impls"]) == 2:
                (new, old) = (min(e["seconds"]) for e in result["impls"].values())
                print(
                    f"  per window, best run: baseline {old:.1f} s, this branch {new:.1f} s "
                    f"({old / new:.2f}x)"
                )
            print(f"  load average {os.getloadavg()[0]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
