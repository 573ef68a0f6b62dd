"""Ports for the servers tests and demos start: nothing else can take one before its server binds it."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys

import balancer.demo.ports as ports
from balancer.demo.ports import ephemeral_range, free_port


def test_ports_come_from_below_the_ephemeral_range_free_and_never_twice():
    low, _ = ephemeral_range()
    handed = [free_port() for _ in range(200)]
    assert len(set(handed)) == len(handed)
    assert all(p < low for p in handed), [p for p in handed if p >= low]
    for port in handed[:20]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))  # still free: raises if another process held it


def test_a_port_in_use_is_never_handed_out(monkeypatch):
    # A port another socket holds, in the range free_port draws from, drawn first: it must be passed over.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        for port in range(ports.LOWEST, ephemeral_range()[0]):
            try:
                held.bind(("127.0.0.1", port))
                break
            except OSError:
                continue
        held.listen()
        taken = held.getsockname()[1]
        draws, draw = iter([taken, taken]), random.randrange
        monkeypatch.setattr(ports.random, "randrange", lambda a, b: next(draws, None) or draw(a, b))
        got = free_port()
        assert got != taken and ports.LOWEST <= got < ephemeral_range()[0]


def test_a_port_another_process_was_handed_is_never_handed_out(monkeypatch, tmp_path):
    # The suite's lanes start brokers at the same time: a port another process chose (and its server has
    # not bound yet) must be passed over even when drawn first.
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    printed = subprocess.run(
        [sys.executable, "-c", "from balancer.demo.ports import free_port; print(free_port(), free_port())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    theirs = [int(p) for p in printed]
    monkeypatch.setattr(ports, "lease_file", lambda: tmp_path / f"balancer-ports-{os.getuid()}.json")
    draws, draw = iter(theirs * 2), random.randrange
    monkeypatch.setattr(ports.random, "randrange", lambda a, b: next(draws, None) or draw(a, b))
    mine = [free_port(), free_port()]
    assert not set(mine) & set(theirs), (mine, theirs)
    assert all(ports.LOWEST <= p < ephemeral_range()[0] for p in mine)


def test_a_damaged_lease_file_is_started_afresh_and_still_hands_out_free_ports(monkeypatch, tmp_path):
    # The lease file is shared with other processes and may hold anything (a crash mid-write, another
    # program): free_port never fails on it, and leaves it valid JSON holding the port it handed out.
    leases = tmp_path / "leases.json"
    monkeypatch.setattr(ports, "lease_file", lambda: leases)
    rng = random.Random(7)
    damaged = [b"", b"\xff\xfe\x00", b"[1, 2]", b'{"a": 1}', b'{"1": null}', b'{"1": {}}', b"{", b"null"]
    damaged += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))) for _ in range(40)]
    for content in damaged:
        leases.write_bytes(content)
        port = free_port()
        assert ports.LOWEST <= port < ephemeral_range()[0], content
        assert str(port) in json.loads(leases.read_text()), content
