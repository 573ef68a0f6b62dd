"""``make run``: the whole product on embedded defaults, end to end, in a few minutes.

Starts the embedded broker, a simulated cluster that just scaled out (two new, empty
brokers) and has a broker that lost its leaderships in a restart, and the streaming job on
local Spark. The simulated clock runs one minute per tick; the job windows the telemetry,
ranks brokers by traffic, plans, and the simulator carries out the plans, so imbalance
falls window after window. Everything it started is stopped on exit.
"""

from __future__ import annotations

import argparse
import logging
import os
import queue
import shutil
import sys
import threading
import time
from pathlib import Path

from balancer.config import REPO_ROOT, ConfigError, duration_seconds, load_config

TICK_MS = 60_000
log = logging.getLogger("balancer.demo")


def _parse_args(argv):
    parser = argparse.ArgumentParser(prog="balancer-demo", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO_ROOT / "conf" / "local.yaml"))
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--max-seconds", type=float, default=240.0, help="stop the demo after this long")
    parser.add_argument("--tick-seconds", type=float, default=1.0, help="real seconds per simulated minute")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(args.config, args.overrides)
    except ConfigError as exc:
        print(f"balancer: {exc}", file=sys.stderr)
        return 2

    from confluent_kafka import Producer
    from rich.console import Console

    from balancer import report
    from balancer.embedded_broker import EmbeddedBroker
    from balancer.scenarios import ScenarioSpec, generate
    from balancer.simulator import SimulatedCluster, publish
    from balancer.spark import job
    from balancer.spark.lakehouse import Lakehouse
    from balancer.spark.session import build_session

    console = Console()
    data_root = Path(config.lakehouse.path).resolve().parent
    # Demo state is throwaway: the embedded broker starts empty, so old checkpoints would point past its end.
    for stale in (Path(config.lakehouse.path), Path(config.checkpoint.path)):
        shutil.rmtree(stale, ignore_errors=True)

    spec = ScenarioSpec(brokers=6, racks=3, topics=24, partitions_per_topic=(6, 24), replication_factor=3,
                        total_bytes_in=300e6, skew=1.1, new_empty_brokers=2, restarted_broker=1,
                        seed=11, cluster="demo-eu-1", utilization=0.45)
    cluster = SimulatedCluster(generate(spec), throttle_bytes_per_sec=config.balancer.throttle_bytes_per_sec)
    console.rule("[bold]Traffic-aware Kafka balancer: embedded demo")
    console.print(f"simulated cluster [bold]{cluster.cluster}[/]: {len(cluster.brokers)} brokers "
                  f"(brokers 6 and 7 just joined, empty; broker 1 restarted and lost its leaderships), "
                  f"{len(cluster.partitions)} partitions")

    with EmbeddedBroker() as broker:
        broker.create_topic(config.source.topic, partitions=4)
        config = config.model_copy(update={"source": config.source.model_copy(
            update={"bootstrap_servers": broker.bootstrap_servers})})
        console.print(f"embedded Kafka broker on {broker.bootstrap_servers}, metrics topic '{config.source.topic}'")
        spark = build_session(master=config.spark.master, app_name="balancer-demo",
                              conf={**config.spark.conf, "spark.ui.enabled": "false"})
        plans: queue.Queue = queue.Queue()
        queries = job.start(spark, config, on_plans=lambda rows: [plans.put(r) for r in rows])
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20})
        stop = threading.Event()
        made: list[dict] = []
        sim_clock = [int((time.time() - 4 * 3600) * 1000) // TICK_MS * TICK_MS]
        window_ms = duration_seconds(config.windows.size) * 1000

        def simulate() -> None:
            while not stop.is_set():
                publish(producer, config.source.topic, cluster.telemetry(sim_clock[0]))
                while not plans.empty():
                    row = plans.get()
                    made.append(row)
                    if row["status"] == "proposed" and row["reassignment_json"]:
                        import json

                        cluster.apply(json.loads(row["reassignment_json"]), sim_clock[0])
                sim_clock[0] += TICK_MS
                stop.wait(args.tick_seconds)

        simulator = threading.Thread(target=simulate, name="simulator", daemon=True)
        started = time.monotonic()
        simulator.start()
        try:
            with console.status("streaming: telemetry → windows → rankings → plans") as status:
                while time.monotonic() - started < args.max_seconds:
                    for query in queries:
                        if query.exception() is not None:
                            raise RuntimeError(f"query {query.name} failed: {query.exception()}")
                    settled = [p for p in made if p["status"] == "balanced"]
                    proposed = [p for p in made if p["status"] == "proposed"]
                    status.update(f"streaming: {len(made)} windows planned, {len(proposed)} plans with actions, "
                                  f"simulated time +{(sim_clock[0] - made[0]['window_start'].timestamp() * 1000) / 60000 if made else 0:.0f} min")
                    if proposed and len(settled) >= 2 and not cluster.pending:
                        break
                    time.sleep(1)
        finally:
            stop.set()
            simulator.join(timeout=30)
            for query in queries:
                query.stop()
        lakehouse = Lakehouse(spark, config.lakehouse.path, engine=config.lakehouse.engine)
        report.print_demo_report(console, lakehouse, config, window_ms=window_ms)
        spark.stop()

    proposed = [p for p in made if p["status"] == "proposed"]
    if not proposed:
        console.print("[red]no plan with actions was made: the demo did not show balancing[/]")
        return 1
    sql = "SELECT window_end, status, imbalance_before, imbalance_after, leader_moves, replica_moves FROM balance_plans ORDER BY window_end"
    console.rule("Where things are")
    console.print(f"Delta tables: {Path(config.lakehouse.path).resolve()}/<table>  (engine: {lakehouse.engine})")
    console.print(f"Query them:   .venv/bin/balancer sql --set lakehouse.path={Path(config.lakehouse.path).resolve()} \"{sql}\"")
    return 0


if __name__ == "__main__":
    sys.exit(main())
