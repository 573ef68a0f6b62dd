"""The demo's cross-check of the job's load model: each broker's own byte counters, apart from the agent."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from balancer.demo.real import RAW_METERS, Meters

DELAY_S = 2.5  # an exporter on a busy box: slower than a 2 s wait, within the agent's 5 s


class _Exporter(BaseHTTPRequestHandler):
    """Counters that grow by 1,000 bytes/s in each direction (split over the pair of series)."""

    started = time.time()

    def do_GET(self) -> None:
        if self.path == "/slow":
            time.sleep(DELAY_S)
        elapsed = time.time() - self.started
        body = "".join(f"{name} {elapsed * 500.0}\n" for pair in RAW_METERS.values() for name in pair)
        if self.path == "/partial":
            body = body.splitlines()[0] + "\n"
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def test_a_slow_exporter_within_the_agents_wait_still_gives_a_rate_and_a_partial_one_says_why():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    meters = Meters(
        {1: f"{base}/fast", 2: f"{base}/slow", 3: f"{base}/partial"}, timeout_s=5.0, interval_s=0.2
    )
    start_ms = int(time.time() * 1000)
    try:
        meters.start()
        time.sleep(3 * DELAY_S + 1)
    finally:
        meters.stop()
        server.shutdown()
    end_ms = int(time.time() * 1000)
    rates = meters.rates(start_ms, end_ms)
    assert sorted(rates) == [1, 2], (rates, meters.missed(start_ms, end_ms))
    for broker, rate in rates.items():
        for direction in ("in", "out"):
            # Each sample is timed at the middle of its round trip: the slow one's rate is off by little.
            assert abs(rate[direction] - 1000.0) < 100.0, (broker, rate)
    missed = meters.missed(start_ms, end_ms)
    assert sorted(missed) == [3], missed
    assert all(why.startswith("no ") for why in missed[3]), missed
