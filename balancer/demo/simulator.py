"""A simulated Kafka cluster that reports telemetry v1 and carries out the plans it is given.

Pure Python (no Spark, no Kafka): ``telemetry(ts_ms)`` returns the records every broker
would publish at that moment; ``apply(reassignment)`` executes a plan the way Kafka would,
leadership at once and replica moves only after their bytes have been copied at the
throttle rate. ``publish`` (the only I/O) sends records to a Kafka topic.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from balancer import telemetry as tm


@dataclass
class _PendingMove:
    topic: str
    partition: int
    replicas: list[int]
    ready_at_ms: int


class SimulatedCluster:
    def __init__(
        self, snapshot: dict, *, noise: float = 0.03, throttle_bytes_per_sec: float = 50e6, seed: int = 0
    ):
        self.cluster = snapshot["cluster"]
        self.brokers = {b["id"]: copy.deepcopy(b) for b in snapshot["brokers"]}
        self.partitions = {(p["topic"], p["partition"]): copy.deepcopy(p) for p in snapshot["partitions"]}
        self.noise = noise
        self.throttle = throttle_bytes_per_sec
        self.rng = np.random.default_rng(seed)
        self.pending: list[_PendingMove] = []
        self.silent_brokers: set[int] = set()
        # Simulated time of the last topology change; telemetry before it describes the old layout.
        self.changed_at_ms = 0

    @property
    def busy(self) -> bool:
        """Replica moves are still copying data: an executor submits no new plan meanwhile."""
        return bool(self.pending)

    def snapshot(self) -> dict:
        return {
            "cluster": self.cluster,
            "brokers": [copy.deepcopy(b) for b in self.brokers.values()],
            "partitions": [copy.deepcopy(p) for p in self.partitions.values()],
        }

    def _jitter(self, value: float) -> float:
        return float(value * max(0.0, 1.0 + self.rng.normal(0.0, self.noise))) if self.noise else float(value)

    def telemetry(self, ts_ms: int) -> list[dict]:
        """Every broker's reports at ``ts_ms``: one per hosted replica, and one for itself."""
        self._complete_moves(ts_ms)
        records = []
        for broker in self.brokers.values():
            if broker["id"] in self.silent_brokers:
                continue
            capacity = broker["capacity"]
            records.append(
                tm.broker_record(
                    ts=ts_ms,
                    cluster=self.cluster,
                    broker=broker["id"],
                    rack=broker.get("rack"),
                    network_in=capacity["network_in"],
                    network_out=capacity["network_out"],
                    disk=capacity["disk"],
                )
            )
        for p in self.partitions.values():
            bytes_in = self._jitter(p["bytes_in"])
            bytes_out = self._jitter(p["bytes_out"])
            for broker_id in p["replicas"]:
                if broker_id in self.silent_brokers:
                    continue
                leads = broker_id == p["leader"]
                # Followers take the same bytes in (replication); only the leader serves consumers.
                records.append(
                    tm.partition_record(
                        ts=ts_ms,
                        cluster=self.cluster,
                        broker=broker_id,
                        topic=p["topic"],
                        partition=p["partition"],
                        leader=leads,
                        replicas=p["replicas"],
                        bytes_in=bytes_in,
                        bytes_out=bytes_out if leads else 0.0,
                        messages_in=bytes_in / 200.0,
                        size=float(p["size"]),
                    )
                )
        return records

    def apply(self, reassignment: dict, now_ms: int, election: dict | None = None) -> int:
        """Execute a plan as Kafka would: the reassignment (``replicas[0]`` = preferred leader), then a
        preferred-leader election for the partitions ``election`` names.

        Returns how many partitions changed at once; replica moves complete once their data
        has been copied at the throttle rate (their new preferred leader takes over then).
        """
        immediate = 0
        for entry in (election or {}).get("partitions", []):
            partition = self.partitions.get((entry["topic"], entry["partition"]))
            if partition is None:
                raise KeyError(f"election names unknown partition {entry['topic']}-{entry['partition']}")
            if partition["leader"] != partition["replicas"][0]:
                partition["leader"] = partition["replicas"][0]
                immediate += 1
                self.changed_at_ms = now_ms
        for entry in reassignment.get("partitions", []):
            key = (entry["topic"], entry["partition"])
            partition = self.partitions.get(key)
            if partition is None:
                raise KeyError(f"plan names unknown partition {key[0]}-{key[1]}")
            unknown = [b for b in entry["replicas"] if b not in self.brokers]
            if unknown:
                raise KeyError(f"plan for {key[0]}-{key[1]} names unknown broker(s) {unknown}")
            new = list(entry["replicas"])
            added = set(new) - set(partition["replicas"])
            if not added:
                partition["replicas"] = new
                partition["leader"] = new[0]
                immediate += 1
                self.changed_at_ms = now_ms
                continue
            copy_ms = math.ceil(partition["size"] * len(added) / self.throttle * 1000)
            self.pending.append(_PendingMove(key[0], key[1], new, now_ms + copy_ms))
        return immediate

    def _complete_moves(self, now_ms: int) -> None:
        still = []
        for move in self.pending:
            if move.ready_at_ms <= now_ms:
                partition = self.partitions[(move.topic, move.partition)]
                partition["replicas"] = move.replicas
                partition["leader"] = move.replicas[0]
                self.changed_at_ms = now_ms
            else:
                still.append(move)
        self.pending = still


def publish(producer, topic: str, records: list[dict]) -> None:
    """Send records keyed by cluster/broker (one broker's reports stay in order on one partition)."""
    for record in records:
        key = f"{record['cluster']}/{record['broker']}".encode()
        while True:
            try:
                producer.produce(topic, key=key, value=tm.encode(record))
                break
            except BufferError:  # local queue full: let it drain
                producer.poll(0.05)
    producer.flush()
