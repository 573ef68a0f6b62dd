"""Helpers of the agent's real-Kafka tests: producers whose achieved rates come from their delivery reports,
an HTTP endpoint a test controls, and the records an agent published."""

from __future__ import annotations

import http.server
import threading
import time
import urllib.request
from collections import defaultdict

import pyarrow as pa
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from balancer import cruise_control as cc


class Load:
    """Produces ``value_bytes`` messages to each partition of ``topic`` at its target bytes/s; the bytes
    each partition got, by the producer's own timestamp, come from delivery reports (what the broker
    acknowledged). The broker counts bytes as stored, record batch headers included (~70 bytes a batch), so
    messages are large enough (4 kB) that headers stay ~2% of the bytes even for a batch per message."""

    def __init__(self, bootstrap: str, topic: str, rates: dict[int, float], *, value_bytes: int = 4000):
        self.topic, self.rates, self.value = topic, rates, b"v" * value_bytes
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100, "acks": "all"})
        self.delivered: list[tuple[int, int, int]] = []  # (partition, timestamp ms, bytes)
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _report(self, err, msg) -> None:
        if err is not None:
            self.errors += 1
        else:
            self.delivered.append((msg.partition(), msg.timestamp()[1], len(msg.value())))

    def _run(self) -> None:
        started = time.monotonic()
        sent = defaultdict(int)
        while not self._stop.is_set():
            elapsed = time.monotonic() - started
            for partition, rate in self.rates.items():
                while sent[partition] * len(self.value) < rate * elapsed:
                    self.producer.produce(
                        self.topic, value=self.value, partition=partition, on_delivery=self._report
                    )
                    sent[partition] += 1
            self.producer.poll(0)
            time.sleep(0.05)
        self.producer.flush(30)

    def start(self) -> Load:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def achieved(self, start_ms: int, end_ms: int) -> dict[int, float]:
        """Bytes/s each partition got with timestamps in [start_ms, end_ms)."""
        got: dict[int, float] = dict.fromkeys(self.rates, 0.0)
        for partition, ts, size in self.delivered:
            if start_ms <= ts < end_ms:
                got[partition] += size
        return {p: b / ((end_ms - start_ms) / 1000) for p, b in got.items()}


class Endpoint:
    """An HTTP endpoint on loopback serving what ``body()`` returns, that a test can take down and bring back
    (the same port)."""

    def __init__(self, body):
        self.body = body
        self._server: http.server.ThreadingHTTPServer | None = None
        self.port = 0
        self.up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def up(self) -> None:
        body = self.body

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                payload = body()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def relay(url: str):
    """A body() that serves what ``url`` serves now."""
    return lambda: urllib.request.urlopen(url, timeout=10).read()


def published(bootstrap: str, topic: str) -> list[dict]:
    """Every Cruise Control record on ``topic``, decoded (a record that does not decode fails the caller)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"read-{topic}", "enable.auto.commit": False}
    )
    # Assigned, not subscribed: one partition (the tests create the metrics topics so), no group to join.
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values, idle_since = [], time.monotonic()
    while time.monotonic() - idle_since < 3:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
            idle_since = time.monotonic()
    consumer.close()
    rows = cc.decode(pa.array(values, pa.binary())).to_pylist()
    bad = [r["error"] for r in rows if r["error"] is not None]
    assert not bad, bad[:3]
    for r in rows:
        r["name"] = cc.RAW_METRIC_TYPES[r["metric_type"]].name
    return rows
