"""``make run``: the balancer on a real Apache Kafka cluster, measured by the brokers themselves.

Starts three Kafka brokers (KRaft, each with the Prometheus JMX exporter) holding five topics whose few hot
partitions carry most of the bytes, broker 1 leading the hottest; producers at known per-partition rates
and a consumer group reading every topic; then a fourth broker joins, empty. ``balancer agent`` measures
every broker from its JMX exporter and publishes Cruise Control's reporter records to a metrics topic (on
a separate broker, as a monitoring cluster would hold it); the job lands them, ranks the brokers by
traffic and proposes a plan; with ``executor.mode: auto`` it starts ``balancer execute``, which carries the
plan out on the real cluster at its computed throttles. The demo prints each broker's bytes in and out in
the plan's window and in the first full window after it completed, as the agent measured them from the
brokers' own meters, against the threshold, and predicted against realized. Everything it started is
stopped on exit.

One module, over 500 lines: the demo is a script read top to bottom (start, load, measure, plan, carry out,
report, stop), and splitting it would hide its order.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from balancer.cli.console import guarded
from balancer.config import REPO_ROOT, Config
from balancer.vocabulary import PlanStatus

if TYPE_CHECKING:  # the job imports Spark, which the demo loads only once it runs
    from balancer.spark.job import Job

K = 1000  # rates in thousands of bytes/s (kB/s); capacities below in Cruise Control's KB (1024)
# topic -> partitions as (replicas, leader first; bytes/s produced). Broker 1 holds a replica of every hot
# partition and leads them; broker 4 joins empty. A broker leads at most one partition of a topic, or
# several of equal rates: Cruise Control's records carry a broker's bytes per topic, which the job splits
# evenly over the partitions the broker leads, so per-partition skew is seen exactly when leaders differ.
TOPICS: dict[str, list[tuple[list[int], float]]] = {
    "clicks": [([1, 2], 50 * K), ([2, 3], 10 * K), ([3, 1], 10 * K)],
    "orders": [([1, 3], 30 * K), ([2, 1], 8 * K), ([3, 2], 8 * K)],
    "payments": [([1, 2], 20 * K), ([2, 3], 5 * K), ([3, 1], 5 * K)],
    "audit": [([1, 3], 10 * K), ([2, 1], 5 * K), ([3, 2], 5 * K)],
    # Many small partitions spread evenly: the fine grain that lets a plan reach the threshold with room.
    "logs": [(replicas, 5 * K) for replicas in ([1, 2], [2, 3], [3, 1], [1, 3], [2, 1], [3, 2])],
}
FIRST_BROKERS = [1, 2, 3]
NEW_BROKER = 4
RACKS = ["rack-a", "rack-b", "rack-c", "rack-d"]
CAPACITY_KB = 1000  # network in and out per broker, KB/s (Cruise Control's capacity file's unit)
CAPACITY_DISK_MB = 2000
VALUE_BYTES = 4000  # record batch headers stay ~2% of the bytes the brokers count
GROUP = "demo-readers"


@dataclass
class Phases:
    """Wall seconds of each phase, in order."""

    started: float = field(default_factory=time.monotonic)
    last: float = field(default_factory=time.monotonic)
    times: dict[str, float] = field(default_factory=dict)

    def mark(self, name: str) -> None:
        now = time.monotonic()
        self.times[name] = now - self.last
        self.last = now

    def total(self) -> float:
        return time.monotonic() - self.started


class Traffic:
    """Producers at each partition's rate (acks=all) and one consumer group reading every topic.

    The rates are the scenario's; what the demo reports is what the brokers measured. ``acked`` counts the
    bytes the brokers acknowledged, per partition, as a cross-check."""

    def __init__(self, bootstrap: str, topics: dict[str, list[tuple[list[int], float]]]):
        from confluent_kafka import Consumer, Producer

        self.rates = {(t, p): rate for t, parts in topics.items() for p, (_, rate) in enumerate(parts)}
        self.value = b"v" * VALUE_BYTES
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 50, "acks": "all", "compression.type": "none"}
        )
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
            }
        )
        self.consumer.subscribe(sorted(topics))
        self.acked: dict[tuple[str, int], int] = defaultdict(int)
        self.consumed = 0
        self.errors = 0
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._produce, name="demo-producer", daemon=True),
            threading.Thread(target=self._consume, name="demo-consumer", daemon=True),
        ]

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.errors += 1
        else:
            self.acked[(msg.topic(), msg.partition())] += len(msg.value())

    def _produce(self) -> None:
        started = time.monotonic()
        sent: dict[tuple[str, int], int] = defaultdict(int)
        while not self._stop.is_set():
            elapsed = time.monotonic() - started
            for (topic, partition), rate in self.rates.items():
                while sent[(topic, partition)] * VALUE_BYTES < rate * elapsed:
                    try:
                        self.producer.produce(
                            topic, value=self.value, partition=partition, on_delivery=self._delivered
                        )
                    except BufferError:
                        break
                    sent[(topic, partition)] += 1
            self.producer.poll(0)
            self._stop.wait(0.05)
        self.producer.flush(30)

    def _consume(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                self.consumed += len(msg.value() or b"")
        self.consumer.close()

    def start(self) -> Traffic:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)

    @property
    def total_rate(self) -> float:
        return sum(self.rates.values())


# The broker-level BrokerTopicMetrics meters (no topic label), as conf/jmx-exporter/kafka.yml names them.
RAW_METERS = {
    "in": (
        "kafka_server_brokertopicmetrics_bytesin_total",
        "kafka_server_brokertopicmetrics_replicationbytesin_total",
    ),
    "out": (
        "kafka_server_brokertopicmetrics_bytesout_total",
        "kafka_server_brokertopicmetrics_replicationbytesout_total",
    ),
}


class Meters:
    """Every broker's own byte counters, scraped from its JMX exporter every ``interval_s``, apart from the
    agent: what each broker received (from producers and, as a follower, from leaders) and sent (to
    consumers and followers). A cross-check of the job's load model, with nothing of the model in it.

    The brokers are scraped at once and wait as long as the agent waits (``timeout_s``): on a busy box an
    exporter with more partitions answers in seconds, and a shorter wait, or one broker waiting on another,
    would leave it with no reading in a window the agent measured."""

    def __init__(self, endpoints: dict[int, str], *, timeout_s: float, interval_s: float = 5.0):
        self.endpoints, self.timeout_s, self.interval_s = endpoints, timeout_s, interval_s
        self.samples: dict[int, list[tuple[float, dict[str, float]]]] = defaultdict(list)
        self.failures: dict[int, list[tuple[float, str]]] = defaultdict(list)  # broker -> (time, why)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-meters", daemon=True)

    def _scrape(self, broker: int, url: str) -> None:
        from balancer.agent import prometheus
        from balancer.agent.jmx import ScrapeError, fetch

        names = {name for pair in RAW_METERS.values() for name in pair}
        asked = time.time()
        try:
            body = fetch(url, timeout_s=self.timeout_s, max_bytes=16 << 20)
        except ScrapeError as exc:
            # A gap: the rate is taken over the samples there are.
            self.failures[broker].append((asked, str(exc)))
            return
        at = (asked + time.time()) / 2  # the counters were read somewhere in between
        found = {x.name: x.value for x in prometheus.parse(body).samples if x.name in names and not x.labels}
        if len(found) == len(names):
            self.samples[broker].append((at, found))
        else:
            self.failures[broker].append((asked, f"no {', '.join(sorted(names - set(found)))}"))

    def _run(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=max(1, len(self.endpoints)), thread_name_prefix="meters") as pool:
            while not self._stop.is_set():
                list(pool.map(lambda item: self._scrape(*item), self.endpoints.items()))
                self._stop.wait(self.interval_s)

    def start(self) -> Meters:
        self._thread.start()
        return self

    def wait_first(self, timeout_s: float) -> None:
        """Until every endpoint answered once (or ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while set(self.samples) < set(self.endpoints) and time.monotonic() < deadline:
            time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def rates(self, start_ms: int, end_ms: int) -> dict[int, dict[str, float]]:
        """Per broker, bytes/s in and out over the samples taken in [start_ms, end_ms] (a broker with fewer
        than two there has none)."""
        out: dict[int, dict[str, float]] = {}
        for broker, samples in list(self.samples.items()):
            inside = [(t, v) for t, v in list(samples) if start_ms <= t * 1000 <= end_ms]
            if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
                continue
            (t0, first), (t1, last) = inside[0], inside[-1]
            out[broker] = {
                direction: sum(last[n] - first[n] for n in pair) / (t1 - t0)
                for direction, pair in RAW_METERS.items()
            }
        return out

    def missed(self, start_ms: int, end_ms: int) -> dict[int, list[str]]:
        """Per broker, why its scrapes in [start_ms, end_ms] gave no reading (brokers with none missed)."""
        out: dict[int, list[str]] = {}
        for broker, failures in list(self.failures.items()):
            inside = [why for t, why in list(failures) if start_ms <= t * 1000 <= end_ms]
            if inside:
                out[broker] = inside
        return out


@dataclass
class Outcome:
    """What the scenario measured: the plan, and each broker's load in its window and after it."""

    plan_id: str
    plan: dict
    status: str  # the plan's last status in plan_events
    before: dict[int, dict]  # broker -> broker_load row of the plan's window
    after: dict[int, dict]  # broker -> broker_load row of the first full window after completion
    outcomes: list[dict]  # plan_outcomes rows
    executions: list[dict]  # plan_executions rows, completed batches
    batches: list[dict]  # plan_batches rows
    ranking: list[dict]  # broker_ranking of the plan's window
    threshold: float  # balance_threshold
    raw_before: dict[int, dict[str, float]]  # broker -> its own meters' bytes/s in and out, the plan's window
    raw_after: dict[int, dict[str, float]]  # the same, the window after
    raw_missed: dict[int, list[str]]  # broker -> why its own meters' scrapes failed in the window after
    misplaced: list[dict]  # plan_actions rows whose partition's replicas or leader differ on the cluster
    throttles_left: dict[str, dict[str, str]]  # "broker 1" / "topic t" -> throttle keys still set

    def limit(self, loads: dict[int, dict], resource: str = "network_in") -> dict[int, float]:
        """Per broker: the most ``resource`` it may carry within the threshold (threshold x the cluster's
        utilization x its capacity)."""
        used = sum(r[resource] or 0.0 for r in loads.values())
        capacity = sum(r[f"capacity_{resource}"] or 0.0 for r in loads.values())
        return {b: self.threshold * used / capacity * r[f"capacity_{resource}"] for b, r in loads.items()}

    def hottest(self, loads: dict[int, dict], resource: str = "network_in") -> tuple[int, float]:
        """(broker, utilization / cluster utilization) of the broker most over its share."""
        used = sum(r[resource] or 0.0 for r in loads.values())
        capacity = sum(r[f"capacity_{resource}"] or 0.0 for r in loads.values())
        if not used or not capacity:
            raise RuntimeError(
                f"the window has no {resource} for any broker: the agent published no rate for it "
                "(metrics endpoints unreachable or answering slower than an interval)"
            )
        ratios = {
            b: (r[resource] or 0.0) / r[f"capacity_{resource}"] / (used / capacity) for b, r in loads.items()
        }
        broker = max(ratios, key=lambda b: ratios[b])
        return broker, ratios[broker]


def capacity_file(path: Path) -> Path:
    path.write_text(
        json.dumps(
            {
                "brokerCapacities": [
                    {
                        "brokerId": "-1",
                        "capacity": {
                            "DISK": str(CAPACITY_DISK_MB),
                            "CPU": "100",
                            "NW_IN": str(CAPACITY_KB),
                            "NW_OUT": str(CAPACITY_KB),
                        },
                        "doc": "every broker of the demo: 1000 KB/s in and out",
                    }
                ]
            }
        )
    )
    return path


def scenario_config(
    config: Config, *, metrics_bootstrap: str, kafka_bootstrap: str, capacity: Path
) -> Config:
    """The demo's config with the addresses of what it started."""
    return config.model_copy(
        update={
            "source": config.source.model_copy(update={"bootstrap_servers": metrics_bootstrap}),
            "metadata": config.metadata.model_copy(update={"bootstrap_servers": kafka_bootstrap}),
            "agent": config.agent.model_copy(update={"bootstrap_servers": kafka_bootstrap}),
            "executor": config.executor.model_copy(update={"bootstrap_servers": kafka_bootstrap}),
            "capacity": config.capacity.model_copy(update={"path": str(capacity)}),
        }
    )


def _rows(lakehouse, table: str, plan_id: str | None = None) -> list[dict]:
    from balancer.spark.lakehouse import arrow_schema

    filters = [] if plan_id is None else [("plan_id", "=", plan_id)]
    return lakehouse.select(table, arrow_schema(table).names, filters).to_pylist()


def _ms(moment: datetime) -> int:
    """Epoch ms of a timestamp from Spark (naive, in the session's time zone: UTC) or delta-rs (aware)."""
    return int((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp() * 1000)


class _Follow:
    """Waits on the job's tables (delta-rs reads on the driver: milliseconds, no Spark job) and says what
    it sees, one line a step; fails when a query failed or the demo ran out of time."""

    def __init__(self, lakehouse, running: Job, say: Callable[[str], None], deadline: float):
        self.lakehouse, self.running, self.say, self.deadline = lakehouse, running, say, deadline
        self.reported: set[int] = set()

    def until(self, condition: Callable[[], bool], what: str) -> None:
        while not condition():
            self.running.check()
            if time.monotonic() > self.deadline:
                raise TimeoutError(f"the demo ran out of time waiting for {what}")
            time.sleep(1)

    def rows(self, table: str, plan_id: str | None = None) -> list[dict]:
        return _rows(self.lakehouse, table, plan_id)

    def executed(self, plan_id: str, batches: list[dict]) -> bool:
        """Says each batch ``balancer execute`` completed; True once all have."""
        rows = self.rows("plan_executions", plan_id)
        bad = [r for r in rows if r["outcome"] in ("failed", "stalled")]
        if bad:
            raise RuntimeError(
                f"balancer execute: batch {bad[0]['batch']} {bad[0]['outcome']}: {bad[0]['detail']}"
            )
        for r in sorted(rows, key=lambda r: r["batch"]):
            if r["outcome"] != "completed" or r["batch"] in self.reported:
                continue
            self.reported.add(r["batch"])
            rates = sorted(json.loads(r["throttle"]).values()) if r["throttle"] else []
            at = f" at {rates[0] / 1e6:.2f}-{rates[-1] / 1e6:.2f} MB/s" if rates else ""
            estimate = f" (estimated {r['estimated_seconds']:.1f}s)" if r["estimated_seconds"] else ""
            self.say(
                f"execute: batch {r['batch']} ({r['kind']}, {r['actions']} actions, "
                f"{(r['bytes_to_move'] or 0) / 1e6:.1f} MB{at}) done in "
                f"{r['measured_seconds']:.1f}s{estimate}"
            )
        return self.reported >= {b["batch"] for b in batches}

    def events(self, plan_id: str) -> list[dict]:
        return sorted(self.rows("plan_events", plan_id), key=lambda e: e["window_end"])


def left_on_cluster(cluster, actions: list[dict]) -> tuple[list[dict], dict[str, dict[str, str]]]:
    """What the cluster itself says once a plan completed, through confluent-kafka's admin client (not the
    executor's): the ``actions`` whose partition has other replicas or another leader than the action's,
    and every throttle key still set on a broker or on a topic the actions touch."""
    client = cluster.admin()
    topics = sorted({a["topic"] for a in actions})
    placed = {
        (t, p): (set(m.replicas), m.leader)
        for t in topics
        for p, m in client.list_topics(t, timeout=10).topics[t].partitions.items()
    }
    misplaced = [
        a
        for a in actions
        if placed.get((a["topic"], a["partition"])) != (set(a["new_replicas"]), a["new_leader"])
    ]
    return misplaced, cluster.throttles(topics)


def run_scenario(
    start_spark: Callable[[], Any],
    config: Config,
    workdir: Path,
    *,
    say: Callable[[str], None] = print,
    phases: Phases | None = None,
    max_seconds: float = 420.0,
) -> Outcome:
    """The whole scenario on a cluster of its own under ``workdir``: brokers, traffic, agent, job, the plan
    carried out, its outcome measured. ``start_spark`` returns the session (called while the new broker
    starts). Every process and thread it started is stopped on return; the session is the caller's."""
    from balancer.agent.runner import Agent
    from balancer.demo.embedded_broker import EmbeddedBroker
    from balancer.demo.kafka_cluster import KafkaCluster
    from balancer.resources import resource_root
    from balancer.spark import job
    from balancer.spark.lakehouse import Lakehouse

    phases = phases or Phases()
    deadline = time.monotonic() + max_seconds
    rules = resource_root() / "conf" / "jmx-exporter" / "kafka.yml"
    cluster = KafkaCluster(workdir / "kafka", size=len(RACKS), racks=RACKS, heap="256m", jmx_exporter=rules)
    metrics = EmbeddedBroker()
    traffic: Traffic | None = None
    agent: Agent | None = None
    meters: Meters | None = None
    running: Job | None = None
    try:
        metrics.start()
        metrics.create_topic(config.source.topic, partitions=1)
        cluster.start(nodes=FIRST_BROKERS)
        say(
            f"Kafka: brokers {', '.join(map(str, FIRST_BROKERS))} up (KRaft, a JMX exporter each, racks "
            f"{', '.join(RACKS[:3])}), logs under {cluster.directory}"
        )
        for topic, partitions in TOPICS.items():
            cluster.create_topic(topic, assignment=[replicas for replicas, _ in partitions])
        # The clients' bootstrap names the brokers that are up (a client retries an address that refuses).
        running = ",".join(f"127.0.0.1:{cluster.node(b).port}" for b in FIRST_BROKERS)
        traffic = Traffic(running, TOPICS).start()
        hot = max((rate, t, p) for t, parts in TOPICS.items() for p, (_, rate) in enumerate(parts))
        say(
            f"traffic: {sum(len(p) for p in TOPICS.values())} partitions of {len(TOPICS)} topics (RF 2) on "
            f"brokers 1-3, producers at {traffic.total_rate / K:.0f} kB/s in all, "
            f"{min(traffic.rates.values()) / K:.0f}-{hot[0] / K:.0f} kB/s a partition (hottest "
            f"{hot[1]}-{hot[2]}, led by broker 1); consumer group '{GROUP}' reads every topic"
        )
        phases.mark("brokers 1-3 and traffic")
        cluster.start_node(NEW_BROKER, wait=False)
        spark = start_spark()
        say(f"Spark up ({spark.sparkContext.master})")
        cluster.wait_ready(nodes=[NEW_BROKER])
        say(f"broker {NEW_BROKER} joined ({RACKS[NEW_BROKER - 1]}), empty")
        phases.mark("Spark and broker 4")

        config = scenario_config(
            config,
            metrics_bootstrap=metrics.bootstrap_servers,
            kafka_bootstrap=cluster.bootstrap_servers,
            capacity=capacity_file(workdir / "capacity.json"),
        )
        # The brokers' own meters first: their first scrape also warms each exporter up. A cold exporter takes
        # seconds to answer its first scrape, and the agent times no rate on an answer that slow, so without
        # this its first window would lack readings.
        meters = Meters(cluster.metrics_urls, timeout_s=config.agent.jmx.timeout.seconds).start()
        meters.wait_first(timeout_s=30)
        proposed: list[dict] = []

        def on_plans(rows: list[dict]) -> None:
            proposed.extend(r for r in rows if r["status"] == PlanStatus.PROPOSED)

        running = job.Job(spark, config, on_plans=on_plans)
        say(
            f"job: streaming on {config.spark.master} ({config.source.connector} connector, "
            f"{config.lakehouse.engine}), {config.windows.size.text} windows, executor.mode "
            f"{config.executor.mode}"
        )
        # The job warms up meanwhile. The agent's first reading is a baseline (no rate): taken just after a
        # window starts, that window is the first with rates and has one every interval, so the plan is made
        # on a whole window of them.
        size_s = config.windows.size.seconds
        time.sleep(size_s - time.time() % size_s + 0.5)
        agent = Agent(config, endpoints=cluster.metrics_urls).start()
        say(
            f"agent: every {config.agent.interval.text} from a window's start, each broker's JMX exporter -> "
            f"Cruise Control records on '{config.source.topic}' (metrics broker {metrics.bootstrap_servers})"
        )
        follow = _Follow(
            Lakehouse(spark, config.lakehouse.path, engine=config.lakehouse.engine), running, say, deadline
        )
        follow.until(lambda: bool(proposed), "the job to propose a plan")
        plan = proposed[0]
        plan_id, plan_end = plan["plan_id"], _ms(plan["window_end"])
        phases.mark("measured, ranked, planned")
        ranking = [r for r in follow.rows("broker_ranking") if _ms(r["window_end"]) == plan_end]
        ranked = sorted(ranking, key=lambda r: r["rank_by_traffic"])
        say(
            f"window ending {plan['window_end']:%H:%M:%S}: brokers by traffic "
            + ", ".join(f"{r['broker']}{' (HOT)' if r['is_hot'] else ''}" for r in ranked)
            + f"; plan {plan_id[:8]} proposed: {plan['leader_moves']} leadership transfers, "
            f"{plan['replica_moves']} replica moves, {plan['bytes_to_move'] / 1e6:.1f} MB; network in "
            f"{plan['network_in_before']:.2f} -> {plan['network_in_after']:.2f} predicted (threshold "
            f"{config.balancer.balance_threshold:.2f})"
        )
        batches = sorted(follow.rows("plan_batches", plan_id), key=lambda b: b["batch"])
        follow.until(
            lambda: follow.executed(plan_id, batches), f"balancer execute to carry {plan_id[:8]} out"
        )
        phases.mark("carried out")

        def completed() -> bool:
            return any(e["status"] == PlanStatus.COMPLETED for e in follow.events(plan_id))

        follow.until(completed, "the job to see the plan completed")
        seen = next(e for e in follow.events(plan_id) if e["status"] == PlanStatus.COMPLETED)
        say(f"job: plan {plan_id[:8]} completed, seen in the window ending {seen['window_end']:%H:%M:%S}")
        actions = follow.rows("plan_actions", plan_id)
        misplaced, throttles_left = left_on_cluster(cluster, actions)
        wrong = ", ".join(f"{a['topic']}-{a['partition']}" for a in misplaced)
        say(
            f"cluster: {len(actions) - len(misplaced)} of {len(actions)} actions in place (replicas, leader)"
            + (f", not {wrong}" if misplaced else "")
            + (f"; throttles left: {throttles_left}" if throttles_left else "; no throttle left")
        )
        follow.until(lambda: bool(follow.rows("plan_outcomes", plan_id)), "the first full window after it")
        outcomes = follow.rows("plan_outcomes", plan_id)
        after_end = _ms(outcomes[0]["window_end"])
        say(f"job: measured the first full window after it (ending {outcomes[0]['window_end']:%H:%M:%S})")
        phases.mark("outcome measured")
        loads = follow.rows("broker_load")
        before = {r["broker"]: r for r in loads if _ms(r["window_end"]) == plan_end}
        after = {r["broker"]: r for r in loads if _ms(r["window_end"]) == after_end}

        def span(rows: dict[int, dict]) -> tuple[int, int]:
            row = next(iter(rows.values()), None)
            return (0, 0) if row is None else (_ms(row["window_start"]), _ms(row["window_end"]))

        return Outcome(
            plan_id=plan_id,
            plan=plan,
            status=follow.events(plan_id)[-1]["status"],
            before=before,
            after=after,
            outcomes=outcomes,
            executions=[r for r in follow.rows("plan_executions", plan_id) if r["outcome"] == "completed"],
            batches=batches,
            ranking=ranked,
            threshold=config.balancer.balance_threshold,
            raw_before=meters.rates(*span(before)),
            raw_after=meters.rates(*span(after)),
            raw_missed=meters.missed(*span(after)),
            misplaced=misplaced,
            throttles_left=throttles_left,
        )
    finally:
        # The agent first, so the job's last micro-batch has little to read; the brokers are killed, not shut
        # down one by one (their data is thrown away with them, and a quorum stopping whole cannot finish
        # controlled shutdowns anyway: KafkaCluster.stop would wait 15 s for that).
        if agent is not None:
            agent.stop()
        if meters is not None:
            meters.stop()
        if traffic is not None:
            traffic.stop()
        if running is not None:
            job.stop_when_idle(running.queries, timeout_seconds=45)  # a busy box: a micro-batch takes 25-40 s
        for node in cluster.nodes:
            cluster.stop_node(node.node_id, kill=True)
        metrics.stop()
        phases.mark("stopped")


def _kb(value: float | None) -> str:
    return "" if value is None else f"{value / K:,.1f}"


def print_outcome(console, outcome: Outcome) -> None:
    from rich.table import Table

    rank = {r["broker"]: r for r in outcome.ranking}
    table = Table(
        title="Each broker's bytes in/out, kB/s: the plan's window (before) and the first full window after "
        "it completed (after). in/out: the job's load model (broker_load) over what the agent scraped from "
        "the brokers' JMX exporters; own meters: each broker's BytesIn+ReplicationBytesIn and "
        "BytesOut+ReplicationBytesOut, scraped apart, over the same windows",
        title_justify="left",
    )
    columns = ("broker", "rank before", "replicas", "in before", "in after", "in limit after", "out before")
    for column in (*columns, "out after", "own meters in", "own meters out"):
        table.add_column(column, justify="right")
    limit = outcome.limit(outcome.after)
    for broker in sorted(outcome.after):
        before, after, ranked = outcome.before.get(broker, {}), outcome.after[broker], rank.get(broker)
        own = {
            direction: " → ".join(
                "?" if broker not in rates else _kb(rates[broker][direction])
                for rates in (outcome.raw_before, outcome.raw_after)
            )
            for direction in ("in", "out")
        }
        over = (after["network_in"] or 0.0) > limit[broker]
        table.add_row(
            str(broker),
            "" if ranked is None else f"{ranked['rank_by_traffic']}{' HOT' if ranked['is_hot'] else ''}",
            f"{before.get('replicas') or 0} → {after['replicas']}",
            _kb(before.get("network_in")),
            ("[red]" if over else "[green]") + _kb(after["network_in"]),
            _kb(limit[broker]),
            _kb(before.get("network_out")),
            _kb(after["network_out"]),
            own["in"],
            own["out"],
        )
    console.print(table)

    predicted = Table(
        title="Predicted vs realized (plan_outcomes): utilization / cluster utilization", title_justify="left"
    )
    for column in ("resource", "broker", "before", "predicted", "realized"):
        predicted.add_column(column, justify="right")
    for r in sorted(
        outcome.outcomes, key=lambda r: (r["resource"], r["broker"] is not None, r["broker"] or 0)
    ):
        if r["resource"] not in ("network_in", "network_out"):
            continue

        def fmt(value):
            return "" if value is None else f"{value:.3f}"

        predicted.add_row(
            r["resource"],
            "cluster" if r["broker"] is None else str(r["broker"]),
            fmt(r["before"]),
            fmt(r["predicted"]),
            fmt(r["realized"]),
        )
    console.print(predicted)


def _parse_args(argv):
    parser = argparse.ArgumentParser(prog="balancer-demo-kafka", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO_ROOT / "conf" / "kafka-demo.yaml"))
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--dir", default="data/kafka-demo", help="brokers' state and logs")
    parser.add_argument("--max-seconds", type=float, default=480.0, help="give up after this long")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show Spark's and the libraries' logs here, not in the log file",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    return guarded(
        "demo-kafka",
        args.config,
        args.overrides,
        lambda config, out: _demo(args, config, out.line),
        verbose=args.verbose,
    )


def _demo(args: argparse.Namespace, config: Config, line: Callable[[str], None]) -> int:
    from rich.console import Console

    from balancer.spark.session import build_session

    console = Console(width=max(Console().width, 132))
    phases = Phases()

    def say(text: str) -> None:
        line(f"[{phases.total():6.1f}s] {text}")

    workdir = Path(args.dir)
    for stale in (workdir, Path(config.lakehouse.path), Path(config.checkpoint.path)):
        shutil.rmtree(stale, ignore_errors=True)
    workdir.mkdir(parents=True)
    console.rule("[bold]Traffic-aware Kafka balancer on real Kafka brokers")
    sessions: list = []

    def start_spark():
        conf = {**config.spark.conf, "spark.ui.enabled": "false"}
        sessions.append(
            build_session(
                master=config.spark.master, app_name="balancer-demo-kafka", conf=conf, short_lived=True
            )
        )
        return sessions[0]

    try:
        outcome = run_scenario(
            start_spark, config, workdir, say=say, phases=phases, max_seconds=args.max_seconds
        )
    finally:
        for session in sessions:
            session.stop()
    print_outcome(console, outcome)
    broker, before = outcome.hottest(outcome.before)
    after_broker, after = outcome.hottest(outcome.after)
    ok = after <= outcome.threshold and outcome.status == PlanStatus.COMPLETED
    console.print(
        f"[bold]network in: hottest broker {broker} at {before:.2f}x the cluster's utilization before, "
        f"hottest {after_broker} at {after:.2f}x after (threshold {outcome.threshold:.2f}); "
        f"plan {outcome.status}[/]"
    )
    total = phases.total()
    line(
        f"wall time {total:.0f}s: "
        + ", ".join(f"{name} {seconds:.0f}s" for name, seconds in phases.times.items())
        + f" ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)"
    )
    root = Path(config.lakehouse.path).resolve()
    sql = (
        "SELECT batch, kind, bytes_to_move, throttle, measured_seconds, outcome FROM plan_executions "
        "WHERE batch >= 0"
    )
    line(f'Query the tables: .venv/bin/balancer sql --set lakehouse.path={root} "{sql}"')
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
