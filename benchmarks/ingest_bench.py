"""Ingest benchmark: telemetry of a 270-broker / 1.3M-replica cluster through the whole job.

    .venv/bin/python benchmarks/ingest_bench.py            # 1.32M replicas, rates 25k/50k/100k/150k rec/s
    .venv/bin/python benchmarks/ingest_bench.py --quick    # 270 brokers, ~130k replicas, fewer rows

Three parts, one process, one embedded (Tansu) broker:

1. **Write path** (``Lakehouse.append`` on delta-rs): the old driver-collect (``toArrow`` +
   ``write_deltalake``) against executor-written files committed by the driver, at a few sizes.
2. **Pipeline**: the real job (``balancer.spark.job.start``, local[2]) runs while a producer
   thread sends the simulated cluster's telemetry at increasing rates. Simulated time is
   compressed: each "sim minute" is one full telemetry round (one record per replica plus one
   per broker) produced at the stage's rate, so windows of 1 sim minute close quickly.
   Reported per stage: offered and landed rates, the backlog left at the end; then the time
   from job start to the first plan and each plan's latency from its records' produce times.
3. **Ceiling**: a plain confluent-kafka consumer reads the same topic afterwards.

Encoding 1.3M records with ``json.dumps`` takes ~10 s, so a round is encoded ONCE and its bytes
are reused for every sim minute with only ``"ts"`` rewritten (noise is therefore identical in
every minute; the planner sees the same loads each window, which does not matter for speed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from cpu import process_cpu_seconds, spark_cpu_seconds

from balancer import telemetry as tm
from balancer.config import load_config
from balancer.demo.embedded_broker import EmbeddedBroker
from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.demo.simulator import SimulatedCluster

MINUTE_MS = 60_000
T0 = 1_790_000_000_000 // 300_000 * 300_000
FULL = dict(
    brokers=270,
    racks=6,
    topics=3000,
    partitions_per_topic=(16, 272),
    total_bytes_in=5e9,
    skew=1.2,
    seed=106,
    cluster="bench-270",
)
QUICK = dict(FULL, topics=300)


def loadavg() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


# -- telemetry ------------------------------------------------------------------------------


class Round:
    """One telemetry round encoded once; ``at(ts)`` re-stamps it without re-encoding."""

    def __init__(self, spec: ScenarioSpec):
        started = time.perf_counter()
        records = SimulatedCluster(generate(spec), noise=0.03, seed=1).telemetry(T0)
        self.keys = [f"{r['cluster']}/{r['broker']}".encode() for r in records]
        self.values = [tm.encode(r) for r in records]
        self.replicas = sum(r["type"] == "partition" for r in records)
        self.stamp = b'"ts":%d,' % T0
        assert all(v.count(self.stamp) == 1 for v in self.values[:1000])
        self.seconds = time.perf_counter() - started

    def __len__(self) -> int:
        return len(self.values)

    def at(self, ts: int) -> list[bytes]:
        new = b'"ts":%d,' % ts
        return [v.replace(self.stamp, new, 1) for v in self.values]


class Feeder(threading.Thread):
    """Produces sim minutes at each stage's rate; remembers when each minute was produced."""

    def __init__(self, bootstrap: str, topic: str, rnd: Round, stages: list[tuple[int, int]]):
        super().__init__(daemon=True)
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 20,
                "batch.size": 1_000_000,
                "queue.buffering.max.messages": 2_000_000,
                "compression.type": "none",
            }
        )
        self.topic, self.round, self.stages = topic, rnd, stages
        self.minutes: dict[int, tuple[float, float]] = {}  # minute → (first, last produce wall time)
        self.stage_log: list[dict] = []
        self.produced = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            minute = 0
            for rate, count in self.stages:
                stage_start, stage_rows = time.perf_counter(), 0
                for _ in range(count):
                    values = self.round.at(T0 + minute * MINUTE_MS)
                    first = time.perf_counter()
                    for i, (key, value) in enumerate(zip(self.round.keys, values)):
                        while True:
                            try:
                                self.producer.produce(self.topic, key=key, value=value)
                                break
                            except BufferError:
                                self.producer.poll(0.01)
                        if i % 5000 == 4999:  # pace to the stage's rate
                            self.producer.poll(0)
                            ahead = stage_start + (stage_rows + i + 1) / rate - time.perf_counter()
                            if ahead > 0:
                                time.sleep(ahead)
                    self.producer.flush(120)
                    self.minutes[minute] = (first, time.perf_counter())
                    stage_rows += len(values)
                    self.produced += len(values)
                    minute += 1
                elapsed = time.perf_counter() - stage_start
                self.stage_log.append(
                    {
                        "rate": rate,
                        "rows": stage_rows,
                        "start": stage_start,
                        "end": time.perf_counter(),
                        "offered": stage_rows / elapsed,
                        "minutes": count,
                    }
                )
        except BaseException as exc:  # reported by the main thread
            self.error = exc


# -- part 1: write path ---------------------------------------------------------------------


def write_path(spark, sizes: list[int], workdir: Path) -> list[dict]:
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
    from pyspark.sql import functions as F

    from balancer.spark import lakehouse as lh
    from balancer.spark.lakehouse import parquet

    def frame(n: int):
        cols = []
        for field in lh.spark_schema("telemetry_raw"):
            name, kind = field.name, field.dataType.simpleString()
            expr = {
                "string": F.concat(F.lit(f"{name}-"), (F.col("id") % 3000).cast("string")),
                "int": (F.col("id") % 1000).cast("int"),
                "bigint": F.col("id"),
                "double": F.col("id") * 1.5,
                "boolean": F.col("id") % 2 == 0,
                "timestamp": F.timestamp_millis(F.lit(T0) + F.col("id")),
                "array<int>": F.array((F.col("id") % 270).cast("int"), (F.col("id") % 7).cast("int")),
            }[kind]
            cols.append(expr.alias(name))
        # Two partitions, like a batch from a 2-partition topic on local[2]; cached, so only the
        # write is timed (the ingest sink writes from a persisted batch too).
        return spark.range(n, numPartitions=2).select(*cols).cache()

    results = []
    for n in sizes:
        data = frame(n)
        data.count()
        row = {"rows": n}
        for name in ("driver-collect", "executor files", "executor, inline < 4 MiB"):
            times = []
            for rep in range(2):
                house = lh.Lakehouse(
                    spark, workdir / f"w{n}-{len(results)}-{name[:4]}-{rep}", engine="delta-rs"
                )
                house.create_all()
                path = house.path("telemetry_raw")
                started = time.perf_counter()
                if name == "driver-collect":  # the previous implementation, verbatim
                    arrow = parquet.conform(data.toArrow(), lh.arrow_schema("telemetry_raw"), "telemetry_raw")
                    row["driver MB"] = arrow.nbytes / 1e6
                    write_deltalake(
                        DeltaTable(path),
                        arrow,
                        mode="append",
                        commit_properties=CommitProperties(app_transactions=[Transaction("a", 0)]),
                    )
                else:
                    limit = 0 if name == "executor files" else parquet.INLINE_MAX_BYTES
                    actions = parquet.write_files(
                        data, path, "telemetry_raw", prefix="b0", inline_max_bytes=limit
                    )
                    DeltaTable(path).create_write_transaction(
                        actions,
                        mode="append",
                        schema=lh.arrow_schema("telemetry_raw"),
                        commit_properties=CommitProperties(app_transactions=[Transaction("a", 0)]),
                    )
                times.append(time.perf_counter() - started)
                assert DeltaTable(path).to_pyarrow_table(columns=["kafka_offset"]).num_rows == n
                shutil.rmtree(house.root)
            row[name] = min(times)
        data.unpersist()
        results.append(row)
        print(
            f"  write {n:>9,} rows: driver-collect {row['driver-collect']:.2f}s "
            f"(driver holds {row['driver MB']:.0f} MB) | executor files {row['executor files']:.2f}s | "
            f"executor+inline {row['executor, inline < 4 MiB']:.2f}s   load {loadavg()}",
            flush=True,
        )
    return results


# -- part 2: pipeline -----------------------------------------------------------------------


class SinkRecorder:
    """Keeps the job's BalancerSink (it runs in this driver process) to read its step timings."""

    def __init__(self):
        from balancer.spark import pipeline

        self.made: list = []
        original, made = pipeline.BalancerSink.__init__, self.made

        def init(self, *args, **kwargs):
            original(self, *args, **kwargs)
            made.append(self)

        pipeline.BalancerSink.__init__ = init

    def seconds(self) -> dict[str, float]:
        total: dict[str, float] = defaultdict(float)
        for sink in self.made:
            for step, sec in sink.seconds.items():
                total[step] += sec
        return dict(total)


class AppendTimer:
    """Wraps Lakehouse.append (driver side) to add up wall time per table."""

    def __init__(self):
        from balancer.spark import lakehouse as lh

        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        original = lh.Lakehouse.append
        timer = self

        def timed(self, table, data, **kw):
            started = time.perf_counter()
            try:
                return original(self, table, data, **kw)
            finally:
                timer.seconds[table] += time.perf_counter() - started
                timer.calls[table] += 1

        lh.Lakehouse.append = timed


def pipeline(spark, args, bootstrap: str, topic: str, rnd: Round, workdir: Path, broker_pid: int) -> dict:
    from balancer.spark import job

    config = load_config(
        None,
        [
            f"source.bootstrap_servers={bootstrap}",
            f"source.topic={topic}",
            f"lakehouse.path={workdir / 'lakehouse'}",
            "lakehouse.engine=delta-rs",
            f"checkpoint.path={workdir / 'checkpoints'}",
            "windows.size=1 minute",
            "windows.slide=1 minute",
            "windows.watermark=1 minute",
            f"trigger.interval={args.trigger}",
            f"source.max_records_per_batch={args.max_batch}",
            *args.set,
        ],
    )
    timer = AppendTimer()
    sinks_made = SinkRecorder()
    plans: list[tuple[float, dict]] = []
    stages = [(rate, args.minutes) for rate in args.rates]
    feeder = Feeder(bootstrap, topic, rnd, stages)

    cpu_before = (*spark_cpu_seconds(), process_cpu_seconds(broker_pid))
    started = time.perf_counter()
    queries = job.start(
        spark, config, on_plans=lambda rows: plans.extend((time.perf_counter(), r) for r in rows)
    )
    feeder.start()
    (query,) = queries  # one query lands telemetry and plans the windows it closes
    total = len(rnd) * args.minutes * len(stages)
    # Minutes 0..n-1 produced; with a 1-minute watermark the last window that can close is n-3
    # (minute n-1's records move the watermark to the end of minute n-2).
    expected_plans = args.minutes * len(stages) - 2
    landed_at: list[tuple[float, int]] = []
    deadline = None
    try:
        while True:
            for q in queries:
                if q.exception() is not None:
                    raise q.exception()
            if feeder.error:
                raise feeder.error
            landed = sum(p["numInputRows"] for p in query.recentProgress)
            landed_at.append((time.perf_counter(), landed))
            if not feeder.is_alive():
                deadline = deadline or time.perf_counter() + args.drain_timeout
                if (
                    landed >= total and len({r["window_end"] for _, r in plans}) >= expected_plans
                ) or time.perf_counter() > deadline:
                    break
            time.sleep(1.0)
    finally:
        ended = time.perf_counter()
        cpu = [b - a for a, b in zip(cpu_before, (*spark_cpu_seconds(), process_cpu_seconds(broker_pid)))]
        progress = {q.name: list(q.recentProgress) for q in queries}
        for q in queries:
            q.stop()

    def landed_by(when: float) -> int:
        done = [n for t, n in landed_at if t <= when]
        return done[-1] if done else 0

    stage_rows = []
    for stage in feeder.stage_log:
        # Landed rate over the stage, and what was still unlanded when it ended.
        before, after = landed_by(stage["start"]), landed_by(stage["end"])
        produced_by_end = sum(s["rows"] for s in feeder.stage_log if s["end"] <= stage["end"])
        stage_rows.append(
            {
                **stage,
                "landed": (after - before) / (stage["end"] - stage["start"]),
                "backlog": produced_by_end - after,
            }
        )
    first_plan = min((t for t, _ in plans), default=None)
    latencies = []
    for wall, row in plans:
        minute = int((row["window_end"].timestamp() * 1000 - T0) // MINUTE_MS) - 1
        if minute in feeder.minutes:
            first, last = feeder.minutes[minute]
            closer = feeder.minutes.get(minute + 2, (None,))[0]
            latencies.append(
                {
                    "minute": minute,
                    "oldest": wall - first,
                    "newest": wall - last,
                    "after_close": wall - closer if closer else None,
                    "status": row["status"],
                }
            )
    landed_total = landed_by(ended)
    return {
        "stages": stage_rows,
        "plans": latencies,
        "first_plan": first_plan - started if first_plan else None,
        "first_data_closing_window0": (feeder.minutes.get(2, (None,))[0] or started) - started,
        "landed": landed_total,
        "total": total,
        "elapsed": ended - started,
        "cpu": dict(
            zip(
                ("Spark JVM", "Spark's Python workers", "driver + producer (this process)", "broker (Tansu)"),
                cpu,
            )
        ),
        "progress": progress,
        "append_s": dict(timer.seconds),
        "append_calls": dict(timer.calls),
        "sink_steps": sinks_made.seconds(),
        "config": config,
    }


def breakdown(progress: list[dict]) -> dict:
    sums: dict[str, float] = defaultdict(float)
    rows = 0
    for p in progress:
        rows += p["numInputRows"]
        for key, value in (p.get("durationMs") or {}).items():
            sums[key] += value / 1000
    busy = sums.get("triggerExecution", 0.0)
    return {"batches": len(progress), "rows": rows, "rows/s while busy": rows / busy if busy else 0.0, **sums}


# -- part 3: ceiling ------------------------------------------------------------------------


def plain_consumer(bootstrap: str, topic: str, partitions: int, n: int) -> float:
    """The ceiling every connector is measured against: records/s of a bare confluent-kafka consumer
    reading the topic's ``n`` records from the start of its ``partitions``, touching each payload."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-plain",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
            "queued.max.messages.kbytes": 65536,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen, eofs = 0, set()
    started = time.perf_counter()
    while seen < n:
        for m in consumer.consume(num_messages=20_000, timeout=1.0):
            if m.error() is None:
                seen += 1
                len(m.value())  # touch the payload, as any real reader does
            elif m.error().code() == KafkaError._PARTITION_EOF:
                eofs.add(m.partition())
        if len(eofs) == partitions and seen < n:
            eofs.clear()  # EOF before the last batch arrived (HW quirk); keep going
    elapsed = time.perf_counter() - started
    consumer.close()
    assert seen == n, (seen, n)
    return n / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="~130k replicas, fewer sizes and rates")
    parser.add_argument(
        "--rates",
        type=lambda s: [int(x) for x in s.split(",")],
        default=None,
        help="offered records/s per stage, comma-separated",
    )
    parser.add_argument("--minutes", type=int, default=None, help="sim minutes per stage")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the telemetry topic")
    parser.add_argument("--trigger", default="5 seconds")
    parser.add_argument("--max-batch", type=int, default=1_000_000)
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=600.0,
        help="seconds to wait, once all is produced, for the last plan",
    )
    parser.add_argument("--skip-write", action="store_true", help="skip part 1 (write path)")
    parser.add_argument("--write-only", action="store_true", help="run part 1 only")
    parser.add_argument(
        "--write-sizes",
        type=lambda s: [int(x) for x in s.split(",")],
        default=None,
        help="rows per write-path case, comma-separated",
    )
    parser.add_argument("--set", action="append", default=[], help="config override key=value")
    args = parser.parse_args()
    args.rates = args.rates or ([25_000, 50_000] if args.quick else [25_000, 50_000, 100_000, 150_000])
    args.minutes = args.minutes or (3 if args.quick else 2)

    from balancer.spark.session import build_session

    print(f"load average at start: {loadavg()} ({os.cpu_count()} cores, shared)", flush=True)
    spark = build_session(
        master="local[2]",
        app_name="ingest-bench",
        conf={
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "6g",
            "spark.sql.streaming.numRecentProgressUpdates": "2000",
            "spark.python.authenticate.socketTimeout": "120s",
        },
    )
    workdir = Path(tempfile.mkdtemp(prefix="ingest-bench-"))
    try:
        if not args.skip_write:
            print("write path (telemetry_raw rows, 2 partitions, best of 2):", flush=True)
            write_path(
                spark,
                args.write_sizes or ([1_000, 100_000] if args.quick else [1_000, 100_000, 1_000_000]),
                workdir,
            )
        if args.write_only:
            return

        rnd = Round(ScenarioSpec(**(QUICK if args.quick else FULL)))
        print(
            f"cluster: 270 brokers, {rnd.replicas:,} replicas -> {len(rnd):,} records per sim minute "
            f"(encoded once in {rnd.seconds:.1f}s)",
            flush=True,
        )
        with EmbeddedBroker() as broker:
            topic = "telemetry-bench"
            broker.create_topic(topic, partitions=args.partitions)
            result = pipeline(spark, args, broker.bootstrap_servers, topic, rnd, workdir, broker.pid)
            print(
                f"\npipeline (local[2], trigger {args.trigger}, windows 1 sim-minute, watermark 1 "
                f"sim-minute; load {loadavg()}):",
                flush=True,
            )
            print(
                "| offered rec/s (target) | offered rec/s (reached) | landed rec/s | backlog at stage end |"
            )
            print("|---:|---:|---:|---:|")
            for s in result["stages"]:
                print(f"| {s['rate']:,} | {s['offered']:,.0f} | {s['landed']:,.0f} | {s['backlog']:,} |")
            print(
                f"landed {result['landed']:,} of {result['total']:,} records in {result['elapsed']:.0f}s "
                f"(overall {result['landed'] / result['elapsed']:,.0f} rec/s)"
            )
            fp = result["first_plan"]
            print(
                f"first plan {fp:.1f}s after job start" if fp else "no plan",
                "; the data that closes window 0 "
                f"(sim minute 2) started {result['first_data_closing_window0']:.1f}s after start",
            )
            print(
                "| window (sim minute) | plan status | latency from oldest record s | from newest record s | "
                "from first record that closes it s |"
            )
            print("|---:|---|---:|---:|---:|")
            for p in result["plans"]:
                close = f"{p['after_close']:.1f}" if p["after_close"] is not None else "-"
                print(f"| {p['minute']} | {p['status']} | {p['oldest']:.1f} | {p['newest']:.1f} | {close} |")
            print("\nwhere the time goes (sum of durationMs over all batches, s):")
            for name, progress in result["progress"].items():
                b = breakdown(progress)
                print(
                    f"  {name}: "
                    + ", ".join(
                        f"{k}={v:,.1f}" if isinstance(v, float) else f"{k}={v:,}" for k, v in b.items()
                    )
                )
            print(
                "  Lakehouse.append wall s per table (calls): "
                + ", ".join(
                    f"{t}={s:.1f} ({result['append_calls'][t]})"
                    for t, s in sorted(result["append_s"].items())
                )
            )
            print(
                "  sink steps, wall s summed over batches: "
                + ", ".join(f"{step} {sec:.1f}" for step, sec in result["sink_steps"].items())
            )
            print(
                f"  CPU over the run ({result['elapsed']:.0f} s wall, {os.cpu_count()} cores), per landed "
                "record:"
            )
            for name, sec in result["cpu"].items():
                print(
                    f"    {name}: {sec:.0f} s = {sec / result['elapsed']:.2f} cores, "
                    f"{sec / max(result['landed'], 1) * 1e6:.1f} µs/record"
                )
            busy = sum(result["cpu"].values())
            print(
                f"    all: {busy:.0f} s = {busy / result['elapsed']:.2f} cores, "
                f"{busy / max(result['landed'], 1) * 1e6:.1f} µs/record"
            )
            ceiling = plain_consumer(broker.bootstrap_servers, topic, args.partitions, result["total"])
            print(
                f"\nplain confluent-kafka consumer on the same topic: {ceiling:,.0f} rec/s (ceiling); "
                f"load {loadavg()}",
                flush=True,
            )
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
