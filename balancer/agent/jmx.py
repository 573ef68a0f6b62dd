"""The Prometheus JMX exporter endpoint of each broker: Kafka's meters and gauges, as the reporter reads them.

Two spellings are read, the ones deployments have:

- the exporter's standard Kafka rules (its example config, Strimzi's ``kafka-metrics.yaml``,
  conf/jmx-exporter/kafka.yml): ``kafka_server_brokertopicmetrics_bytesin_total{topic="t"}``,
  ``kafka_log_log_size{topic="t",partition="0"}``;
- no rules at all (Amazon MSK's open monitoring):
  ``kafka_server_BrokerTopicMetrics_Count{name="BytesInPerSec",topic="t"}``,
  ``kafka_log_Log_Value{name="Size",topic="t",partition="0"}``.

Names are compared lower-cased (``lowercaseOutputName`` is a per-deployment choice). What Cruise Control's
reporter reports and JMX has:

| exporter                                         | Cruise Control type                              |
|--------------------------------------------------|--------------------------------------------------|
| BrokerTopicMetrics BytesIn/BytesOut/MessagesIn   | TOPIC_* with a topic label, ALL_TOPIC_* without  |
| BrokerTopicMetrics TotalProduce/FetchRequests    | TOPIC_/ALL_TOPIC_ PRODUCE/FETCH_REQUEST_RATE     |
| BrokerTopicMetrics ReplicationBytesIn/Out        | ALL_TOPIC_REPLICATION_BYTES_IN/OUT               |
| Log Size                                         | PARTITION_SIZE                                   |
| java.lang OperatingSystem ProcessCpuLoad         | BROKER_CPU_UTIL                                  |

Meters are read as their ``Count`` and turned into rates by :mod:`balancer.agent.rates` (the exporter's
own one-minute rates are not exported by the standard rules, and counts make gaps and resets visible).
Every other BrokerTopicMetrics series, and a known series whose labels or value cannot be used, is counted
as unmapped by name; series of other families (JVM, request metrics) are counted as ignored.
"""

from __future__ import annotations

import math
import re
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from balancer import cruise_control as cc
from balancer.agent import prometheus
from balancer.agent.measurement import BrokerMeasurement, Problems, RoundTrips
from balancer.agent.rates import CounterRates
from balancer.metadata import TOPIC_NAME

# BrokerTopicMetrics meter (lower-cased, without PerSec) -> (TOPIC type or None, ALL_TOPIC type)
METERS: dict[str, tuple[int | None, int]] = {
    "bytesin": (cc.TOPIC_BYTES_IN, cc.ALL_TOPIC_BYTES_IN),
    "bytesout": (cc.TOPIC_BYTES_OUT, cc.ALL_TOPIC_BYTES_OUT),
    "messagesin": (cc.TOPIC_MESSAGES_IN_PER_SEC, cc.ALL_TOPIC_MESSAGES_IN_PER_SEC),
    "totalproducerequests": (cc.TOPIC_PRODUCE_REQUEST_RATE, cc.ALL_TOPIC_PRODUCE_REQUEST_RATE),
    "totalfetchrequests": (cc.TOPIC_FETCH_REQUEST_RATE, cc.ALL_TOPIC_FETCH_REQUEST_RATE),
    # Kafka has replication meters across all topics only.
    "replicationbytesin": (None, cc.ALL_TOPIC_REPLICATION_BYTES_IN),
    "replicationbytesout": (None, cc.ALL_TOPIC_REPLICATION_BYTES_OUT),
}
_RULED_METER = re.compile(r"kafka_server_brokertopicmetrics_([a-z]+)_total")
_DEFAULT_METER = "kafka_server_brokertopicmetrics_count"
_SIZES = ("kafka_log_log_size", "kafka_log_log_value")
_CPU = "java_lang_operatingsystem_processcpuload"
_STARTED = "process_start_time_seconds"  # the JVM's start: a change means the broker restarted


class ScrapeError(RuntimeError):
    """An endpoint gave nothing usable this interval (down, slow, not Prometheus text)."""


@dataclass(frozen=True)
class Scrape:
    broker: int
    text: str
    at_s: float  # time.time() halfway between the request and the body's arrival
    round_trip_s: float = 0.0  # the exporter read the counts at some moment within it


def fetch(url: str, *, timeout_s: float, max_bytes: int) -> str:
    """The body of ``url`` as text; ScrapeError for anything but a 200 within the limits."""
    request = urllib.request.Request(url, headers={"Accept": "text/plain;version=0.0.4"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            if response.status != 200:
                raise ScrapeError(f"HTTP {response.status}")
            body = response.read(max_bytes + 1)
    except urllib.error.HTTPError as exc:
        raise ScrapeError(f"HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ScrapeError(f"unreachable ({reason})") from None
    if len(body) > max_bytes:
        raise ScrapeError(f"response larger than {max_bytes} bytes (agent.jmx.max_response_bytes)")
    return body.decode("utf-8", errors="replace")


class JmxSource:
    """Scrapes each broker's endpoint and turns it into a :class:`BrokerMeasurement`."""

    def __init__(
        self,
        *,
        timeout_s: float,
        max_bytes: int,
        max_gap_s: float,
        max_rate: float,
        max_series: int,
        max_skew_s: float | None = None,
    ):
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        # A scrape is timed at the middle of its round trip, so its time is off by up to half of it. An
        # answer slower than 2 * max_skew_s (a cold exporter's first scrape takes seconds) cannot time a
        # rate: its counts end no interval and start none; its gauges (sizes, CPU) still count.
        self.max_skew_s = max_skew_s
        self.untimed = Problems()
        self.round_trips = RoundTrips()
        self.rates = CounterRates(max_gap_s=max_gap_s, max_rate=max_rate, max_series=max_series)
        self.unmapped = Problems()  # series of the families read whose labels or value cannot be used
        self.failures = Problems()  # scrapes that gave nothing, by broker and reason
        self.ignored = 0  # series of families the agent does not read
        self._started: dict[int, float] = {}

    def measure(self, endpoints: Mapping[int, str]) -> tuple[list[BrokerMeasurement], dict[int, str]]:
        """One reading of every endpoint: the measurements, and broker -> why it has none this interval."""
        scrapes: list[Scrape] = []
        failed: dict[int, str] = {}

        def one(item: tuple[int, str]) -> Scrape | tuple[int, str]:
            broker, url = item
            sent = time.time()
            try:
                text = fetch(url, timeout_s=self.timeout_s, max_bytes=self.max_bytes)
                arrived = time.time()
                return Scrape(broker, text, (sent + arrived) / 2, arrived - sent)
            except ScrapeError as exc:
                return broker, str(exc)

        items = sorted(endpoints.items())
        if items:
            with ThreadPoolExecutor(max_workers=min(8, len(items))) as pool:
                for result in pool.map(one, items):
                    if isinstance(result, Scrape):
                        scrapes.append(result)
                    else:
                        failed[result[0]] = result[1]
        measurements = []
        for scrape in scrapes:
            self.round_trips.add(scrape.round_trip_s)
            try:
                measurements.append(self.read(scrape))
            except ScrapeError as exc:
                failed[scrape.broker] = str(exc)
        for broker, reason in failed.items():
            self.failures.add(f"broker {broker}: {reason}")
        return measurements, failed

    def read(self, scrape: Scrape) -> BrokerMeasurement:
        """A scrape's body as a measurement (rates need the broker's previous scrape)."""
        parsed = prometheus.parse(scrape.text)
        if not parsed.samples:
            raise ScrapeError(
                f"no Prometheus samples ({parsed.bad_lines} lines that are not)"
                if parsed.bad_lines
                else "no Prometheus samples (empty body)"
            )
        broker, at_s = scrape.broker, scrape.at_s
        measurement = BrokerMeasurement(broker=broker, ts=int(at_s * 1000))
        if parsed.bad_lines:
            self.unmapped.add("lines that are not Prometheus samples", parsed.bad_lines)
        started = [s.value for s in parsed.samples if s.name == _STARTED]
        if started:
            if broker in self._started and self._started[broker] != started[0]:
                # A restarted JVM: its counts started again, whatever they read now.
                self.rates.forget(lambda key: key[0] == broker)
                self.rates.counts.resets += 1
            self._started[broker] = started[0]
        timed = self.max_skew_s is None or scrape.round_trip_s <= 2 * self.max_skew_s
        if not timed:
            self.rates.forget(lambda key: key[0] == broker)
            self.untimed.add(f"broker {broker}: answered too slowly to time a rate")
        for sample in parsed.samples:
            self._map(sample, measurement, at_s, timed=timed)
        return measurement

    def _map(self, sample: prometheus.Sample, m: BrokerMeasurement, at_s: float, *, timed: bool) -> None:
        name = sample.name.lower()
        labels = sample.labels
        meter: str | None = None
        ruled = _RULED_METER.fullmatch(name)
        if ruled is not None:
            meter = ruled.group(1)
        elif name == _DEFAULT_METER:
            meter = labels.get("name", "").lower().removesuffix("persec")
        if meter is not None:
            if timed:
                self._meter(name, meter, sample, m, at_s)
        elif name in _SIZES:
            if name == "kafka_log_log_value" and labels.get("name") != "Size":
                self.ignored += 1
                return
            topic, partition = labels.get("topic"), labels.get("partition", "")
            if topic is None or not TOPIC_NAME.fullmatch(topic) or not partition.isdigit():
                self.unmapped.add(f"{name}: no valid topic and partition labels")
            elif not math.isfinite(sample.value) or sample.value < 0:
                self.unmapped.add(f"{name}: size not a finite number >= 0")
            else:
                m.sizes[(topic, int(partition))] = sample.value
        elif name == _CPU:
            if math.isfinite(sample.value) and 0.0 <= sample.value <= 1.0:
                m.broker_value(cc.BROKER_CPU_UTIL, sample.value)
            else:
                self.unmapped.add(f"{name}: outside [0, 1]")  # the JVM says -1 when it cannot tell
        else:
            self.ignored += 1

    def _meter(
        self, name: str, meter: str, sample: prometheus.Sample, m: BrokerMeasurement, at_s: float
    ) -> None:
        types = METERS.get(meter)
        if types is None:
            self.unmapped.add(f"BrokerTopicMetrics {meter}: no Cruise Control metric")
            return
        topic_type, all_type = types
        topic = sample.labels.get("topic")
        if topic is not None and topic_type is None:
            self.unmapped.add(f"BrokerTopicMetrics {meter}: no per-topic Cruise Control metric")
            return
        if topic is not None and not TOPIC_NAME.fullmatch(topic):
            self.unmapped.add(f"BrokerTopicMetrics {meter}: topic label is not a Kafka topic name")
            return
        metric = all_type if topic is None else topic_type
        assert metric is not None
        rate = self.rates.update((m.broker, metric, topic), sample.value, at_s)
        if rate is None:
            return
        if topic is None:
            m.broker_value(metric, rate)
        else:
            m.topic_rate(metric, topic, rate)
