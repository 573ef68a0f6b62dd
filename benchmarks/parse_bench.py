"""Telemetry parsing throughput on local[2]: our parser beside the previous design and the floor.

    .venv/bin/python benchmarks/parse_bench.py [--records N] [--bad-share F]

- scan: read the values only (the floor for anything that touches them);
- one typed pass: a single from_json, no validation (the floor for parsing);
- two passes (older design): the all-string and the typed from_json on every record + our rules;
- rules on every record (previous): the typed pass on every record, the all-string pass only
  where it failed, all ~70 rules on every record;
- parse_telemetry: the same, but the rules only where the one-expression valid-record guard
  is not TRUE.
Each figure is the best of 3 runs over the same cached input, in one process, with the CPU
time the JVM spent per record over those 3 runs (steadier than wall time on a shared box).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import functions as F

from balancer import telemetry as tm
from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.demo.simulator import SimulatedCluster
from balancer.spark.ingest import parse
from balancer.spark.session import build_session


def two_pass(kafka, max_value_bytes: int):
    """The previous design, kept here as the baseline: both from_json passes on every record."""
    value = F.col("value").cast("string")
    guarded = F.when(F.octet_length(F.col("value")) <= max_value_bytes, value)
    parsed = kafka.select(
        value.alias("value"),
        F.from_json(guarded, parse.RAW_SCHEMA, {"columnNameOfCorruptRecord": "_corrupt_record"}).alias(
            "_raw"
        ),
        F.from_json(
            guarded,
            parse.TYPED_SCHEMA,
            {"columnNameOfCorruptRecord": "_corrupt_record", "allowNonNumericNumbers": "true"},
        ).alias("_typed"),
    )
    now_ms = F.unix_millis(F.current_timestamp())
    reason = F.coalesce(
        *parse.quarantine_rules(
            F.col("_raw"),
            F.col("_typed"),
            F.col("value"),
            max_value_bytes,
            now_ms,
            max_rate=1e13,
            max_size=1e15,
        )
    )
    return parsed.select(F.col("_typed")["broker"], reason.alias("quarantine_reason"))


def rules_on_every_record(kafka, max_value_bytes: int):
    """The design before the valid-record guard, kept as the baseline: every rule on every record."""
    value = F.col("value").cast("string")
    guarded = F.when(F.octet_length(F.col("value")) <= max_value_bytes, value)
    options = {"columnNameOfCorruptRecord": "_corrupt_record"}
    parsed = kafka.select(
        value.alias("value"),
        F.from_json(guarded, parse.TYPED_SCHEMA, {**options, "allowNonNumericNumbers": "true"}).alias(
            "_typed"
        ),
    )
    typed = F.col("_typed")
    failed = typed.isNull() | typed["_corrupt_record"].isNotNull()
    parsed = parsed.withColumn("_raw", F.when(failed, F.from_json(guarded, parse.RAW_SCHEMA, options)))
    now_ms = F.unix_millis(F.current_timestamp())
    reason = F.coalesce(
        *parse.quarantine_rules(
            F.col("_raw"), typed, F.col("value"), max_value_bytes, now_ms, max_rate=1e13, max_size=1e15
        )
    )
    return parsed.select(typed["broker"], reason.alias("quarantine_reason"))


def children_cpu() -> float:
    """CPU seconds of this process's live children: the Spark JVM (spark-submit execs java)."""
    total = 0.0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid():
                total += sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def best_of(label: str, frame, records: int, runs: int = 3) -> float:
    times = []
    cpu = children_cpu()
    for _ in range(runs):
        started = time.perf_counter()
        frame.write.format("noop").mode("overwrite").save()
        times.append(time.perf_counter() - started)
    cpu = (children_cpu() - cpu) / runs
    rate = records / min(times)
    print(
        f"{label:<48} {rate:>10,.0f} records/s ({min(times):.2f} s)   CPU {1e6 * cpu / records:5.2f} "
        f"µs/record   load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return rate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--bad-share", type=float, default=0.01, help="share of malformed records")
    args = parser.parse_args()

    cluster = SimulatedCluster(
        generate(ScenarioSpec(brokers=30, topics=60, partitions_per_topic=(8, 32))), seed=1
    )
    values, minute = [], 0
    while len(values) < args.records:
        values += [tm.encode(r) for r in cluster.telemetry(1_790_000_000_000 + minute * 60_000)]
        minute += 1
    values = values[: args.records]
    bad_every = int(1 / args.bad_share) if args.bad_share > 0 else 0
    if bad_every:
        values = [
            json.dumps({"v": 1, "type": "partition", "ts": "soon"}).encode() if i % bad_every == 0 else v
            for i, v in enumerate(values)
        ]

    spark = build_session(
        master="local[2]", conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}
    )
    kafka = (
        spark.createDataFrame(
            [(None, v, "metrics", 0, i, None) for i, v in enumerate(values)],
            "key binary, value binary, topic string, partition int, offset long, timestamp timestamp",
        )
        .repartition(2)
        .cache()
    )
    kafka.count()
    print(
        f"{len(values):,} records of ~{sum(map(len, values)) // len(values)} bytes, "
        f"{args.bad_share:.0%} malformed, local[2], load average {os.getloadavg()[0]:.1f}"
    )
    best_of("scan (floor)", kafka.select(F.length("value")), len(values))
    best_of(
        "one typed pass, no validation (floor)",
        kafka.select(F.from_json(F.col("value").cast("string"), parse.TYPED_SCHEMA).alias("t")).select(
            "t.broker"
        ),
        len(values),
    )
    before = best_of("two passes on every record (older)", two_pass(kafka, 65536), len(values))
    unguarded = best_of("rules on every record (previous)", rules_on_every_record(kafka, 65536), len(values))
    after = best_of(
        "parse_telemetry (rules behind the valid guard)",
        parse.parse_telemetry(kafka, max_value_bytes=65536, max_rate=1e13, max_size=1e15).select(
            "broker", "quarantine_reason"
        ),
        len(values),
    )
    print(
        f"speed-up: {after / unguarded:.2f}x over rules on every record, {after / before:.2f}x over two "
        f"passes   (load average now {os.getloadavg()[0]:.1f})"
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
