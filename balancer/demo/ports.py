"""Loopback ports for the servers the demos and tests start (Kafka nodes, Tansu, Spark, S3 stand-in).

A port is chosen here and bound later by another process (a JVM seconds after it starts). A port the
kernel could hand out as an ephemeral port (to any process's outgoing connection or ``bind(0)``) may be
taken in that window, and the server then exits at start. So ports come from below the kernel's
ephemeral range, where nothing is assigned without asking for it by number, each one free when chosen
and never handed out twice by this process.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 20000  # below the well-known and registered services most machines run
_handed: set[int] = set()


def ephemeral_range() -> tuple[int, int]:
    """The kernel's ephemeral port range (Linux's default where it cannot be read)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A loopback TCP port free now, outside the ephemeral range, not handed out before by this
    process (``bind(0)``'s port where the range leaves no room below it)."""
    low, _ = ephemeral_range()
    if low - LOWEST >= 1000:
        for _ in range(500):
            port = random.randrange(LOWEST, low)
            if port in _handed:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _handed.add(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    _handed.add(port)
    return port
