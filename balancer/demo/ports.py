"""Loopback ports for the servers the demos and tests start (Kafka nodes, Tansu, Spark, S3 stand-in).

A port is chosen here and bound later by another process (a JVM seconds after it starts). A port the
kernel could hand out as an ephemeral port (to any process's outgoing connection or ``bind(0)``) may be
taken in that window, and the server then exits at start. So ports come from below the kernel's
ephemeral range, where nothing is assigned without asking for it by number, each one free when chosen.
Two processes of ours choosing at once (the test suite's lanes each start brokers) must not choose the
same port either: every port handed out is leased for ``LEASE_SECONDS`` in a file all processes of this
user share (under a lock), long enough for any server to bind it; once bound, the bind check keeps it.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import socket
import tempfile
import time
from pathlib import Path

LOWEST = 20000  # below the well-known and registered services most machines run
LEASE_SECONDS = 900.0
_handed: set[int] = set()


def ephemeral_range() -> tuple[int, int]:
    """The kernel's ephemeral port range (Linux's default where it cannot be read)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def lease_file() -> Path:
    """The leases every process of this user shares."""
    return Path(tempfile.gettempdir()) / f"balancer-ports-{os.getuid()}.json"


def free_port() -> int:
    """A loopback TCP port free now, outside the ephemeral range, neither handed out before by this
    process nor leased by another (``bind(0)``'s port where the range leaves no room below it)."""
    try:
        fd = os.open(lease_file(), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:  # no shared file to lease in: this process's own record still holds
        return _choose(set())
    with os.fdopen(fd, "r+") as leases:
        fcntl.flock(leases, fcntl.LOCK_EX)
        now = time.time()
        try:
            held = {int(port): float(until) for port, until in json.loads(leases.read() or "{}").items()}
        except (ValueError, TypeError, AttributeError):
            held = {}
        held = {port: until for port, until in held.items() if until > now}
        port = _choose(set(held))
        held[port] = now + LEASE_SECONDS
        leases.seek(0)
        leases.truncate()
        leases.write(json.dumps(held))
        return port  # the lock goes with the file


def _choose(leased: set[int]) -> int:
    low, _ = ephemeral_range()
    if low - LOWEST >= 1000:
        for _ in range(500):
            port = random.randrange(LOWEST, low)
            if port in _handed or port in leased:
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
