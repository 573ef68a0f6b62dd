"""The agent's loop: every interval, measure every broker, publish, report.

:class:`Agent` is what ``balancer agent`` runs and what a demo or a test embeds: ``tick()`` is one interval,
``run(intervals)`` runs that many (or until ``stop()``), ``start()`` runs it on a background thread. One
interval never stops the loop: a broker that cannot be measured is a gap in the topic (nothing published for
it), its reason is counted and logged, and the next interval tries again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from balancer.agent import publish
from balancer.agent.admin import AdminSource
from balancer.agent.jmx import JmxSource
from balancer.agent.measurement import BrokerMeasurement
from balancer.config import Config

log = logging.getLogger("balancer.agent")

# Rates are given across at most this many intervals: one missed scrape leaves a gap, not a long average.
MAX_GAP_INTERVALS = 1.5
# A scrape is timed at the middle of its round trip; one slower than a whole interval cannot be placed in
# its interval and times no rate (a cold exporter's first answer; on a busy box answers of a second or two
# are common and still count). Each interval's log line gives the scrapes' round trips (p50, max), to check
# this bound against what the exporters really answer.
MAX_SKEW_INTERVALS = 0.5


@dataclass
class TickReport:
    """One interval."""

    ts: int  # epoch ms when it started
    measured: list[int]  # brokers with a measurement
    failed: dict[int, str]  # broker -> why it has none (-1: the whole cluster)
    published: int  # records sent and acknowledged
    rejected: Counter[str]  # impossible figures not published, by metric
    cpu_s: float  # the agent's CPU time for the interval's work
    wall_s: float


@dataclass
class Totals:
    ticks: int = 0
    published: int = 0
    gaps: int = 0  # (broker, interval) pairs without a measurement
    rejected: Counter[str] = field(default_factory=Counter)
    cpu_s: float = 0.0


class Agent:
    def __init__(self, config: Config, *, endpoints: Mapping[int, str] | None = None):
        """``endpoints`` (broker id -> exporter URL) replaces agent.jmx.endpoints (a demo's own brokers)."""
        from confluent_kafka import Producer

        if not isinstance(config, Config):
            raise TypeError(f"config: expected balancer.config.Config, got {type(config).__name__}")
        self.config = config
        agent = config.agent
        self.interval_s = agent.interval.seconds
        self.bootstrap_servers = (
            agent.bootstrap_servers or config.metadata.bootstrap_servers or config.source.bootstrap_servers
        )
        self.options = dict(agent.options or config.metadata.options or config.source.options)
        self.endpoints = dict(agent.jmx.endpoints if endpoints is None else endpoints)
        if agent.source == "jmx" and not self.endpoints and agent.jmx.url_template is None:
            raise ValueError(
                "endpoints: the jmx source needs an endpoint per broker (or agent.jmx.url_template)"
            )
        limits = dict(
            max_gap_s=MAX_GAP_INTERVALS * self.interval_s,
            max_rate=config.source.max_rate,
            max_series=agent.max_series,
        )
        self.source: JmxSource | AdminSource
        if agent.source == "jmx":
            self.source = JmxSource(
                timeout_s=agent.jmx.timeout.seconds,
                max_bytes=agent.jmx.max_response_bytes,
                max_skew_s=MAX_SKEW_INTERVALS * self.interval_s,
                **limits,
            )
        else:
            self.source = AdminSource(
                self.bootstrap_servers,
                self.options,
                timeout_s=min(30.0, max(5.0, self.interval_s / 2)),
                max_groups=agent.max_consumer_groups,
                **limits,
            )
        self.capacities = None
        if agent.format == "v1":
            from balancer.capacity import read_capacities

            assert config.capacity.path is not None  # the config requires it for v1
            self.capacities = read_capacities(config.capacity.path)
        self.producer = Producer(
            {**config.source.options, "bootstrap.servers": config.source.bootstrap_servers, "linger.ms": 50}
        )
        self.totals = Totals()
        self.last: TickReport | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- one interval ------------------------------------------------------------------------------------
    def _metadata(self):
        from balancer.metadata import poll_metadata

        return poll_metadata(
            self.bootstrap_servers, self.options, self.config.agent.cluster or "cluster", timeout_s=10
        )

    def _endpoints(self, metadata) -> dict[int, str]:
        if self.endpoints:
            return self.endpoints
        template = self.config.agent.jmx.url_template
        assert template is not None
        hosts = metadata.hosts if metadata is not None else {}
        return {b: template.format(host=host, broker=b) for b, host in hosts.items()}

    def measure(self) -> tuple[list[BrokerMeasurement], dict[int, str]]:
        metadata = None
        if isinstance(self.source, JmxSource):
            if not self.endpoints:
                metadata = _BrokerHosts.read(self.bootstrap_servers, self.options)
            return self.source.measure(self._endpoints(metadata))
        return self.source.measure()

    def tick(self) -> TickReport:
        started, cpu = time.monotonic(), time.process_time()
        ts = int(time.time() * 1000)
        measurements, failed = self.measure()
        limits = publish.Limits(self.config.source.max_rate, self.config.source.max_size)
        published = 0
        topic = self.config.source.topic
        if self.config.agent.format == "cruise-control":
            for key, value, at in publish.cruise_control_records(measurements, limits):
                self._produce(topic, key, value, at)
                published += 1
        else:
            from balancer import telemetry as tm

            assert self.capacities is not None
            metadata = self._metadata()
            for record in publish.v1_records(measurements, metadata, self.capacities, limits):
                key = f"{record['cluster']}/{record['broker']}".encode()
                self._produce(topic, key, tm.encode(record), record["ts"])
                published += 1
        unsent = self.producer.flush(30)
        report = TickReport(
            ts=ts,
            measured=sorted(m.broker for m in measurements),
            failed=failed,
            published=published - unsent,
            rejected=limits.rejected,
            cpu_s=time.process_time() - cpu,
            wall_s=time.monotonic() - started,
        )
        self.totals.ticks += 1
        self.totals.published += report.published
        self.totals.gaps += len(failed)
        self.totals.rejected.update(report.rejected)
        self.totals.cpu_s += report.cpu_s
        self.last = report
        untimed = self.source.untimed.total() if isinstance(self.source, JmxSource) else 0
        trips = self.source.round_trips.summary() if isinstance(self.source, JmxSource) else ""
        log.info(
            "interval: %d brokers measured, %d records published%s%s%s%s; unmapped so far: %d (%s); "
            "cpu %.3fs",
            len(report.measured),
            report.published,
            f", no measurement from {failed}" if failed else "",
            f", impossible figures withheld {dict(report.rejected)}" if report.rejected else "",
            f", scrape round trips {trips}" if trips else "",
            f", scrapes too slow to time a rate so far: {untimed}" if untimed else "",
            self.source.unmapped.total(),
            self.source.unmapped.summary(),
            report.cpu_s,
        )
        return report

    def _produce(self, topic: str, key: bytes, value: bytes, at_ms: int) -> None:
        while True:
            try:
                self.producer.produce(topic, key=key, value=value, timestamp=at_ms)
                return
            except BufferError:  # the local queue is full: let deliveries drain it
                self.producer.poll(0.5)

    # -- the loop ----------------------------------------------------------------------------------------
    def run(self, intervals: int | None = None) -> Totals:
        """``intervals`` ticks (None: until stop()), one every agent.interval, aligned to its start."""
        if intervals is not None and (
            isinstance(intervals, bool) or not isinstance(intervals, int) or intervals < 1
        ):
            raise ValueError(f"intervals: expected an integer >= 1 or None, got {intervals!r}")
        done = 0
        next_at = time.monotonic()
        while not self._stop.is_set() and (intervals is None or done < intervals):
            try:
                self.tick()
            except Exception as exc:  # one interval never ends the agent; it is a gap and said so
                self.totals.gaps += 1
                log.warning("interval failed: %s: %s", type(exc).__name__, exc)
            done += 1
            next_at += self.interval_s
            if intervals is not None and done >= intervals:
                break
            self._stop.wait(max(0.0, next_at - time.monotonic()))
        return self.totals

    def start(self) -> Agent:
        """Runs until stop() on a daemon thread."""
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("agent already started")
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name="balancer-agent", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 60.0) -> Totals:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        self.producer.flush(10)
        if isinstance(self.source, AdminSource):
            self.source.close()
        return self.totals

    def __enter__(self) -> Agent:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()


@dataclass(frozen=True)
class _BrokerHosts:
    hosts: dict[int, str]

    @staticmethod
    def read(bootstrap_servers: str, options: Mapping[str, str]) -> _BrokerHosts:
        from confluent_kafka.admin import AdminClient

        listed = AdminClient({**options, "bootstrap.servers": bootstrap_servers}).list_topics(timeout=10)
        return _BrokerHosts({int(b): m.host for b, m in listed.brokers.items()})
