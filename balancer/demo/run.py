"""``make run-sim``: the whole product on embedded defaults, end to end, in a few minutes.

Starts the embedded broker, a simulated cluster that just scaled out (two new, empty
brokers) and has a broker that lost its leaderships in a restart, and the streaming job on
local Spark. The simulated clock runs one minute per tick. The job windows the telemetry,
ranks brokers by traffic and proposes one plan; the simulator acts as the operator's
executor and carries it out batch by batch at the computed throttles, while the job follows
the plan in the telemetry (executing, with progress, then completed), compares the first full
window after it with what the plan predicted, and waits before planning again. Everything it
started is stopped on exit.
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
from collections import Counter
from pathlib import Path

from balancer.cli.console import guarded
from balancer.config import REPO_ROOT
from balancer.vocabulary import PlanStatus

TICK_MS = 60_000
# Demo topics keep only minutes of data, so throttled replica moves finish within a few simulated minutes.
DEMO_RETENTION_SCALE = 0.0001
# The simulated clock waits at most this long for the job to finalize a window it closed.
LOCKSTEP_SECONDS = 60.0
log = logging.getLogger("balancer.demo")


def _parse_args(argv):
    parser = argparse.ArgumentParser(prog="balancer-demo", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO_ROOT / "conf" / "local.yaml"))
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--max-seconds", type=float, default=360.0, help="stop the demo after this long")
    parser.add_argument("--tick-seconds", type=float, default=1.0, help="real seconds per simulated minute")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show Spark's and the libraries' logs here, not in the log file",
    )
    return parser.parse_args(argv)


def demo_cluster(throttle_bytes_per_sec: float):
    from balancer.demo.scenarios import ScenarioSpec, generate
    from balancer.demo.simulator import SimulatedCluster

    spec = ScenarioSpec(
        brokers=6,
        racks=3,
        topics=24,
        partitions_per_topic=(6, 24),
        replication_factor=3,
        total_bytes_in=300e6,
        skew=1.1,
        new_empty_brokers=2,
        restarted_broker=1,
        seed=11,
        cluster="demo-eu-1",
        utilization=0.45,
    )
    snapshot = generate(spec)
    for partition in snapshot["partitions"]:
        partition["size"] = int(partition["size"] * DEMO_RETENTION_SCALE)
    for broker in snapshot["brokers"]:
        broker["capacity"]["disk"] *= DEMO_RETENTION_SCALE
    return SimulatedCluster(snapshot, throttle_bytes_per_sec=throttle_bytes_per_sec)


class Executor:
    """Carries out the job's plan like an operator's executor: one plan at a time, batch by batch as
    ``plan_batches`` has them (``balancer export`` writes the same batches as Kafka's files).

    Leadership batches take effect at once. A replica batch starts once the previous one finished
    copying; each move copies at its sending broker's computed throttle, shared with that broker's
    other moves in the batch. The executor tells the job nothing: the job sees the plan progress
    only in the telemetry.
    """

    def __init__(self, cluster, lakehouse_path: Path):
        self.cluster = cluster
        self.lakehouse_path = lakehouse_path
        self.default_throttle = cluster.throttle
        self.seen: list[dict] = []
        self.executed: list[dict] = []  # plans whose every batch was carried out
        self.current: dict | None = None
        self.batches: list[dict] = []
        self.started: list[tuple[int, str, int, str, float | None]] = []  # (sim ms, plan, batch, kind, MB/s)

    def _plan_batches(self, plan_id: str) -> list[dict]:
        from deltalake import DeltaTable

        rows = DeltaTable(str(self.lakehouse_path / "plan_batches")).to_pyarrow_table().to_pylist()
        return sorted((r for r in rows if r["plan_id"] == plan_id), key=lambda r: r["batch"])

    def offer(self, rows: list[dict], now_ms: int) -> None:
        self.seen.extend(rows)
        if self.current is None:
            proposed = [r for r in rows if r["status"] == PlanStatus.PROPOSED]
            if not proposed:
                return
            self.current = max(proposed, key=lambda r: r["window_end"])
            self.batches = self._plan_batches(self.current["plan_id"])
        if self.cluster.busy:
            return
        if not self.batches:
            self.executed.append(self.current)
            self.current = None
            return
        self._run(self.batches.pop(0), now_ms)

    def _run(self, batch: dict, now_ms: int) -> None:
        reassignment = json.loads(batch["reassignment_json"] or "null") or {"partitions": []}
        if batch["kind"] == "leadership":
            self.cluster.apply(reassignment, now_ms, election=json.loads(batch["election_json"] or "null"))
            self.started.append((now_ms, self.current["plan_id"], batch["batch"], batch["kind"], None))
            return
        throttle = {int(b): float(r) for b, r in json.loads(batch["throttle"] or "{}").items()}
        sender = {(a["topic"], a["partition"]): a["old_leader"] for a in self.current["actions"]}
        shared = Counter(sender[(e["topic"], e["partition"])] for e in reassignment["partitions"])
        for entry in reassignment["partitions"]:
            # The simulator copies each move on its own: at the sender's rate over its moves in this batch.
            leader = sender[(entry["topic"], entry["partition"])]
            self.cluster.throttle = (
                throttle.get(leader, min(throttle.values(), default=self.default_throttle)) / shared[leader]
            )
            self.cluster.apply({"version": 1, "partitions": [entry]}, now_ms)
        self.cluster.throttle = self.default_throttle
        self.started.append(
            (
                now_ms,
                self.current["plan_id"],
                batch["batch"],
                batch["kind"],
                max(throttle.values(), default=0.0) / 1e6,
            )
        )

    def settled(self) -> bool:
        """A plan was carried out, and the job has since planned again and proposed nothing (``balanced``, or
        ``unbalanced`` with what binds it)."""
        if not self.executed or self.current is not None or self.cluster.busy:
            return False
        after = [r for r in self.seen if r["window_start"].timestamp() * 1000 >= self.cluster.changed_at_ms]
        return any(r["status"] in (PlanStatus.BALANCED, PlanStatus.UNBALANCED) for r in after)


def stray_values(record: dict) -> list[bytes]:
    """What a faulty reporter or a stray producer puts on a metrics topic: a cut-off JSON value, bytes
    that are not UTF-8, and a partition report with a negative byte rate. The job quarantines each
    with its reason (``telemetry_quarantine``) and goes on."""
    negative = {**record, "bytes_in": -1.0}
    return [b'{"v": 1, "type": "partition", "ts": ', b"\xff\xfe not telemetry", json.dumps(negative).encode()]


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    # Before Spark starts: its logs and the libraries' go to the log file, the demo's tables to the console.
    return guarded(
        "demo", args.config, args.overrides, lambda config, _out: _demo(args, config), verbose=args.verbose
    )


def _demo(args: argparse.Namespace, config) -> int:
    from confluent_kafka import Producer
    from rich.console import Console

    from balancer.demo import report
    from balancer.demo.embedded_broker import EmbeddedBroker
    from balancer.demo.simulator import publish
    from balancer.spark import job
    from balancer.spark.lakehouse import Lakehouse
    from balancer.spark.session import build_session

    console = Console(width=max(Console().width, 132))
    # Demo state is throwaway: the embedded broker starts empty, so old checkpoints would point past its end.
    for stale in (Path(config.lakehouse.path), Path(config.checkpoint.path)):
        shutil.rmtree(stale, ignore_errors=True)
    cluster = demo_cluster(config.balancer.throttle_bytes_per_sec)
    executor = Executor(cluster, Path(config.lakehouse.path))
    console.rule("[bold]Traffic-aware Kafka balancer: embedded demo")
    console.print(
        f"simulated cluster [bold]{cluster.cluster}[/]: {len(cluster.brokers)} brokers in 3 racks "
        f"(brokers 6 and 7 just joined, empty; broker 1 restarted and lost its leaderships), "
        f"{len(cluster.partitions)} partitions; one simulated minute every {args.tick_seconds:g}s"
    )

    with EmbeddedBroker() as broker:
        broker.create_topic(config.source.topic, partitions=4)
        config = config.model_copy(
            update={
                "source": config.source.model_copy(update={"bootstrap_servers": broker.bootstrap_servers})
            }
        )
        console.print(
            f"embedded Kafka broker on {broker.bootstrap_servers}, metrics topic '{config.source.topic}'"
        )
        spark = build_session(
            master=config.spark.master,
            app_name="balancer-demo",
            conf={**config.spark.conf, "spark.ui.enabled": "false"},
            short_lived=True,
        )
        plans: queue.Queue = queue.Queue()
        streaming = job.Job(spark, config, on_plans=plans.put)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20})
        stop = threading.Event()
        clock = {"now": int((time.time() - 6 * 3600) * 1000) // TICK_MS * TICK_MS}

        size_ms = config.windows.size.ms
        watermark_ms = config.windows.watermark.ms

        def take() -> None:
            rows = []
            while not plans.empty():
                rows.extend(plans.get())
            executor.offer(rows, clock["now"])

        def simulate() -> None:
            finalized = (clock["now"] - watermark_ms) // size_ms * size_ms  # the latest window end waited for
            first = True
            while not stop.is_set():
                records = cluster.telemetry(clock["now"])
                publish(producer, config.source.topic, records)
                if first:
                    partition = next(r for r in records if r["type"] == "partition")
                    for value in stray_values(partition):
                        producer.produce(config.source.topic, value=value)
                    first = False
                take()
                # Lockstep: once this minute's telemetry closes a window, the simulated clock waits for the
                # job to finalize it, so the executor acts at the simulated time a plan is made (the job
                # takes seconds per window, a simulated minute passes every tick).
                closes = (clock["now"] - watermark_ms) // size_ms * size_ms
                waited = time.monotonic()
                while (
                    closes > finalized and not stop.is_set() and time.monotonic() - waited < LOCKSTEP_SECONDS
                ):
                    ends = [r["window_end"].timestamp() * 1000 for r in executor.seen]
                    if ends and max(ends) >= closes:
                        break
                    stop.wait(0.2)
                    take()
                finalized = max(finalized, closes)
                clock["now"] += TICK_MS
                stop.wait(args.tick_seconds)

        simulator = threading.Thread(target=simulate, name="simulator", daemon=True)
        started = time.monotonic()
        simulator.start()
        try:
            with console.status("streaming") as status:
                while time.monotonic() - started < args.max_seconds and not executor.settled():
                    streaming.check()
                    running = executor.current is not None
                    status.update(
                        f"streaming: {len(executor.seen)} windows finalized, {len(executor.executed)} "
                        f"plan(s) carried out{', executing a plan' if running else ''}"
                        f"{' (replica moves copying)' if cluster.busy else ''}"
                    )
                    time.sleep(1)
        finally:
            stop.set()
            simulator.join(timeout=30)
            producer.flush(10)
            producer.close()  # disconnect before the broker stops, not after
            job.stop_when_idle(streaming.queries, timeout_seconds=60)
        lakehouse = Lakehouse(spark, config.lakehouse.path, engine=config.lakehouse.engine)
        report.print_demo_report(console, lakehouse, executed=[p["plan_id"] for p in executor.executed])
        spark.stop()

    if not executor.executed:
        console.print("[red]no plan was carried out: the demo did not show balancing[/]")
        return 1
    root = Path(config.lakehouse.path).resolve()
    sql = (
        "SELECT window_end, status, imbalance_before, imbalance_after, leader_moves, replica_moves "
        "FROM balance_plans ORDER BY window_end"
    )
    console.rule("Where things are")
    console.print(f"Delta tables ({lakehouse.engine}): {root}/<table>")
    console.print(f'Query them:  .venv/bin/balancer sql --set lakehouse.path={root} "{sql}"', soft_wrap=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
