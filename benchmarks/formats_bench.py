"""The two source formats side by side: v1 JSON and Cruise Control's reporter records, same cluster, same run.

    .venv/bin/python benchmarks/formats_bench.py [--minutes N] [--runs N]

The ingest benchmark's ``--quick`` cluster (270 brokers, 127,602 replicas) reports N sim minutes in each
format, into its own topic on the embedded broker: v1 sends one record per replica and per broker; Cruise
Control's reporter one PARTITION_SIZE per replica, three topic metrics per (leader, topic) and three broker
metrics per broker (``balancer.demo.cc_reporter``). Then, on local[2], per format: read + parse to a noop
sink (the source decodes in its reading task: Arrow's JSON reader, or the numpy decoder of
``balancer.cruise_control``), and the sink's landing step (``BalancerSink.land``: cache, one pass writing
telemetry_raw and telemetry_quarantine, the ingest contract).

Each line: records/s, and replica-minutes/s (what a cluster's reporting costs, whatever the format's
record count), best of ``--runs``, with JVM and Python-worker CPU µs per record.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from ingest_bench import QUICK, T0, Round
from landing_bench import measure, produce_minutes

from balancer.config import load_config
from balancer.demo.cc_reporter import from_telemetry
from balancer.demo.embedded_broker import EmbeddedBroker
from balancer.demo.scenarios import ScenarioSpec, generate
from balancer.demo.simulator import SimulatedCluster
from balancer.spark.job import parse_stream, python_source, python_source_options
from balancer.spark.session import build_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=3)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()

    spec = ScenarioSpec(**QUICK)
    v1 = Round(spec)
    cc_pairs = from_telemetry(SimulatedCluster(generate(spec), noise=0.03, seed=1).telemetry(T0))

    def cc_at(ts: int):
        stamp = struct.pack(">q", ts)
        return ((key, value[:3] + stamp + value[11:]) for key, value in cc_pairs)

    spark = build_session(
        master="local[2]", conf={"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}
    )
    with EmbeddedBroker() as broker:
        counts = {}
        for name, pairs_at in (("v1", lambda ts: zip(v1.keys, v1.at(ts))), ("cruise-control", cc_at)):
            broker.create_topic(f"formats-{name}", partitions=args.partitions)
            counts[name] = produce_minutes(
                broker.bootstrap_servers, f"formats-{name}", args.minutes, pairs_at
            )
        replica_minutes = v1.replicas * args.minutes
        print(
            f"{v1.replicas:,} replicas x {args.minutes} sim minutes: v1 {counts['v1']:,} records, "
            f"Cruise Control {counts['cruise-control']:,} records; load "
            f"{' / '.join(f'{x:.1f}' for x in os.getloadavg())}\n",
            flush=True,
        )
        rows = []
        for name in ("v1", "cruise-control"):
            overrides = [
                f"source.bootstrap_servers={broker.bootstrap_servers}",
                f"source.topic=formats-{name}",
                f"source.format={name}",
                "lakehouse.engine=delta-rs",
            ]
            if name == "cruise-control":
                overrides += ["source.cluster=bench", "metadata.source=file", "metadata.path=unused.json"]
            config = load_config(None, overrides)
            # The streaming source's batch twin: same options, read once from earliest.
            reader = spark.read.format(python_source(spark, config))
            for key, value in python_source_options(config, streaming=False).items():
                reader = reader.option(key, value)
            parsed = parse_stream(reader.load(), config)
            label = f"{name:<15}"
            row = measure(
                spark,
                f"{label} read + parse → noop",
                lambda p=parsed: p.write.format("noop").mode("overwrite").save(),
                counts[name],
                args.runs,
            )
            rows.append((name, "parse", row))
            row = measure(
                spark,
                f"{label} land (the sink's landing step)",
                _land(spark, parsed, config),
                counts[name],
                args.runs,
            )
            rows.append((name, "land", row))
        print()
        for name, step, row in rows:
            print(
                f"{name:<15} {step:<6} {row['rate']:>10,.0f} records/s  "
                f"{replica_minutes / row['seconds']:>10,.0f} replica-minutes/s  "
                f"({counts[name] / replica_minutes:.2f} records per replica-minute)",
                flush=True,
            )
    spark.stop()


def _land(spark, parsed, config):
    import shutil
    import tempfile

    from balancer.spark.lakehouse import Lakehouse
    from balancer.spark.pipeline import BalancerSink

    def run():
        workdir = Path(tempfile.mkdtemp(prefix="formats-bench-"))
        try:
            local = config.model_copy(
                update={"lakehouse": config.lakehouse.model_copy(update={"path": str(workdir / "lakehouse")})}
            )
            lakehouse = Lakehouse(spark, local.lakehouse.path, engine="delta-rs")
            lakehouse.create_all()
            sink = BalancerSink(lakehouse, local, workdir / "checkpoints", app_id="formats-bench")
            assert sink.land(parsed, 0, None) is not None
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    return run


if __name__ == "__main__":
    main()
