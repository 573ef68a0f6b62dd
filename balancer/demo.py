"""``make run``: the whole product on embedded defaults, end to end, in a few minutes.

Starts the embedded broker, a simulated cluster that just scaled out (two new, empty
brokers) and has a broker that lost its leaderships in a restart, and the streaming job on
local Spark. The simulated clock runs one minute per tick. The job windows the telemetry,
ranks brokers by traffic and plans; the simulator acts as the operator's executor: it
carries out the newest plan made from telemetry of the current layout, one at a time,
replica moves throttled. Imbalance falls window after window. Everything it started is
stopped on exit.
"""

from __future__ import annotations

import argparse
import json
import logging
import queue
import shutil
import sys
import threading
import time
from pathlib import Path

from balancer.config import REPO_ROOT, ConfigError, load_config

TICK_MS = 60_000
# Demo topics keep only minutes of data, so throttled replica moves finish within a few simulated minutes.
DEMO_RETENTION_SCALE = 0.001
log = logging.getLogger("balancer.demo")


def _parse_args(argv):
    parser = argparse.ArgumentParser(prog="balancer-demo", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO_ROOT / "conf" / "local.yaml"))
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--max-seconds", type=float, default=240.0, help="stop the demo after this long")
    parser.add_argument("--tick-seconds", type=float, default=1.0, help="real seconds per simulated minute")
    return parser.parse_args(argv)


def demo_cluster(throttle_bytes_per_sec: float):
    from balancer.scenarios import ScenarioSpec, generate
    from balancer.simulator import SimulatedCluster

    spec = ScenarioSpec(brokers=6, racks=3, topics=24, partitions_per_topic=(6, 24), replication_factor=3,
                        total_bytes_in=300e6, skew=1.1, new_empty_brokers=2, restarted_broker=1,
                        seed=11, cluster="demo-eu-1", utilization=0.45)
    snapshot = generate(spec)
    for partition in snapshot["partitions"]:
        partition["size"] = int(partition["size"] * DEMO_RETENTION_SCALE)
    for broker in snapshot["brokers"]:
        broker["capacity"]["disk"] *= DEMO_RETENTION_SCALE
    return SimulatedCluster(snapshot, throttle_bytes_per_sec=throttle_bytes_per_sec)


class Executor:
    """Carries out plans like an operator's executor: the newest fresh plan, one at a time.

    A plan is fresh when its window started after the last topology change; older windows
    describe a layout that no longer exists.
    """

    def __init__(self, cluster):
        self.cluster = cluster
        self.seen: list[dict] = []
        self.executed: list[dict] = []

    def offer(self, rows: list[dict], now_ms: int) -> None:
        self.seen.extend(rows)
        if self.cluster.busy:
            return
        fresh = [r for r in self.seen if r["status"] == "proposed" and r not in self.executed
                 and r["window_start"].timestamp() * 1000 >= self.cluster.changed_at_ms]
        if fresh:
            newest = max(fresh, key=lambda r: r["window_end"])
            self.cluster.apply(json.loads(newest["reassignment_json"] or "{}"), now_ms,
                               election=json.loads(newest["election_json"] or "{}"))
            self.executed.append(newest)

    def settled(self) -> bool:
        """A plan was carried out and the windows since then needed nothing more."""
        if not self.executed or self.cluster.busy:
            return False
        after = [r for r in self.seen if r["window_start"].timestamp() * 1000 >= self.cluster.changed_at_ms]
        return len(after) >= 1 and all(r["status"] == "balanced" for r in after)


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
    from balancer.simulator import publish
    from balancer.spark import job
    from balancer.spark.lakehouse import Lakehouse
    from balancer.spark.session import build_session

    console = Console(width=max(Console().width, 132))
    # Demo state is throwaway: the embedded broker starts empty, so old checkpoints would point past its end.
    for stale in (Path(config.lakehouse.path), Path(config.checkpoint.path)):
        shutil.rmtree(stale, ignore_errors=True)
    cluster = demo_cluster(config.balancer.throttle_bytes_per_sec)
    executor = Executor(cluster)
    console.rule("[bold]Traffic-aware Kafka balancer: embedded demo")
    console.print(f"simulated cluster [bold]{cluster.cluster}[/]: {len(cluster.brokers)} brokers in 3 racks "
                  f"(brokers 6 and 7 just joined, empty; broker 1 restarted and lost its leaderships), "
                  f"{len(cluster.partitions)} partitions; one simulated minute every {args.tick_seconds:g}s")

    with EmbeddedBroker() as broker:
        broker.create_topic(config.source.topic, partitions=4)
        config = config.model_copy(update={"source": config.source.model_copy(
            update={"bootstrap_servers": broker.bootstrap_servers})})
        console.print(f"embedded Kafka broker on {broker.bootstrap_servers}, metrics topic '{config.source.topic}'")
        spark = build_session(master=config.spark.master, app_name="balancer-demo",
                              conf={**config.spark.conf, "spark.ui.enabled": "false"})
        plans: queue.Queue = queue.Queue()
        queries = job.start(spark, config, on_plans=plans.put)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20})
        stop = threading.Event()
        clock = {"now": int((time.time() - 6 * 3600) * 1000) // TICK_MS * TICK_MS}

        def simulate() -> None:
            while not stop.is_set():
                publish(producer, config.source.topic, cluster.telemetry(clock["now"]))
                rows = []
                while not plans.empty():
                    rows.extend(plans.get())
                executor.offer(rows, clock["now"])
                clock["now"] += TICK_MS
                stop.wait(args.tick_seconds)

        simulator = threading.Thread(target=simulate, name="simulator", daemon=True)
        started = time.monotonic()
        simulator.start()
        try:
            with console.status("streaming") as status:
                while time.monotonic() - started < args.max_seconds and not executor.settled():
                    for query in queries:
                        if query.exception() is not None:
                            raise RuntimeError(f"query {query.name} failed: {query.exception()}")
                    status.update(f"streaming: {len(executor.seen)} windows planned, {len(executor.executed)} "
                                  f"plans carried out{', replica moves copying' if cluster.busy else ''}")
                    time.sleep(1)
        finally:
            stop.set()
            simulator.join(timeout=30)
            producer.flush(10)
            producer.close()  # disconnect before the broker stops, not after
            job.stop_when_idle(queries, timeout_seconds=60)
        lakehouse = Lakehouse(spark, config.lakehouse.path, engine=config.lakehouse.engine)
        report.print_demo_report(console, lakehouse, executed=[p["plan_id"] for p in executor.executed])
        spark.stop()

    if not executor.executed:
        console.print("[red]no plan was carried out: the demo did not show balancing[/]")
        return 1
    root = Path(config.lakehouse.path).resolve()
    sql = ("SELECT window_end, status, imbalance_before, imbalance_after, leader_moves, replica_moves "
           "FROM balance_plans ORDER BY window_end")
    console.rule("Where things are")
    console.print(f"Delta tables ({lakehouse.engine}): {root}/<table>")
    console.print(f"Query them:  .venv/bin/balancer sql --set lakehouse.path={root} \"{sql}\"", soft_wrap=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
