"""Seeded synthetic cluster snapshots (pure Python + numpy; no I/O).

Placement follows Kafka's ``AdminUtils.assignReplicasToBrokers`` (rack-aware variant when the
brokers have racks), so a generated cluster looks like one built by ``kafka-topics --create``;
then the spec's event (new empty brokers, a restarted broker) is applied on top.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from balancer.planner.model import ColumnarSnapshot
from balancer.vocabulary import RESOURCES

_RETENTION_SECONDS = np.array([6 * 3600, 24 * 3600, 3 * 24 * 3600, 7 * 24 * 3600], dtype=np.float64)


@dataclass(frozen=True, kw_only=True)
class ScenarioSpec:
    brokers: int = 6
    racks: int = 3  # 0 or 1: no rack information
    topics: int = 20
    partitions_per_topic: tuple[int, int] = (4, 32)  # inclusive range, uniform per topic
    replication_factor: int = 3
    total_bytes_in: float = 200e6  # produce B/s summed over all partitions
    skew: float = 1.2  # Pareto tail exponent of topic traffic; 0 = uniform
    new_empty_brokers: int = 0  # added after placement, hold nothing
    restarted_broker: int | None = None  # this broker id lost every leadership it had
    heterogeneous_capacity: bool = False
    seed: int = 7
    cluster: str = "synthetic"
    utilization: float = 0.4  # mean network utilization the capacities are sized for
    hot_key_sigma: float = 0.5  # lognormal sigma of partition traffic inside a topic (skew > 0)
    # Zipf topic traffic: the k-th busiest topic carries ~k**-zipf_exponent (ranks shuffled over
    # topics). None: Pareto(skew) weights instead. Real fleets' topic traffic is often Zipf-like
    # (a handful of topics carry most bytes), a heavier head than Pareto(1.2) draws.
    zipf_exponent: float | None = None
    # Lognormal sigma of a partition's size independent of its traffic (0: size is exactly
    # bytes_in x the topic's retention). Compacted topics, backfills and uneven keys give sizes a
    # tail of their own, so disk and traffic call for different moves.
    size_sigma: float = 0.0

    def __post_init__(self) -> None:
        if self.brokers < 1:
            raise ValueError(f"brokers must be >= 1, got {self.brokers}")
        if self.racks < 0 or self.racks > self.brokers:
            raise ValueError(f"racks must be in [0, brokers={self.brokers}], got {self.racks}")
        if self.topics < 1:
            raise ValueError(f"topics must be >= 1, got {self.topics}")
        lo, hi = self.partitions_per_topic
        if lo < 1 or hi < lo:
            raise ValueError(
                f"partitions_per_topic must be (lo, hi) with 1 <= lo <= hi, got {self.partitions_per_topic}"
            )
        if not 1 <= self.replication_factor <= self.brokers:
            raise ValueError(
                f"replication_factor must be in [1, brokers={self.brokers}], got {self.replication_factor}"
            )
        if self.total_bytes_in <= 0:
            raise ValueError(f"total_bytes_in must be > 0, got {self.total_bytes_in}")
        if self.skew < 0:
            raise ValueError(f"skew must be >= 0, got {self.skew}")
        if self.new_empty_brokers < 0:
            raise ValueError(f"new_empty_brokers must be >= 0, got {self.new_empty_brokers}")
        if self.restarted_broker is not None and not 0 <= self.restarted_broker < self.brokers:
            raise ValueError(
                f"restarted_broker must be a broker id in [0, {self.brokers}), got {self.restarted_broker}"
            )
        if not 0 < self.utilization < 1:
            raise ValueError(f"utilization must be in (0, 1), got {self.utilization}")
        if self.hot_key_sigma < 0:
            raise ValueError(f"hot_key_sigma must be >= 0, got {self.hot_key_sigma}")
        if self.zipf_exponent is not None and not 0 < self.zipf_exponent <= 10:
            raise ValueError(f"zipf_exponent must be None or in (0, 10], got {self.zipf_exponent}")
        if self.size_sigma < 0:
            raise ValueError(f"size_sigma must be >= 0, got {self.size_sigma}")


def _replica_index(first: np.ndarray, shift: np.ndarray, j: np.ndarray | int, n: int) -> np.ndarray:
    # AdminUtils.replicaIndex
    return (first + 1 + (shift + j) % (n - 1)) % n


def rack_alternated(broker_ids: list[int], racks: dict[int, str]) -> list[int]:
    """AdminUtils.getRackAlternatedBrokerList: one broker per rack in turn, racks sorted."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(broker_ids):
        by_rack.setdefault(racks[b], []).append(b)
    order = sorted(by_rack)
    iters = {r: iter(by_rack[r]) for r in order}
    out: list[int] = []
    i = 0
    while len(out) < len(broker_ids):
        nxt = next(iters[order[i]], None)
        if nxt is not None:
            out.append(nxt)
        i = (i + 1) % len(order)
    return out


def assign_replicas(
    n_partitions: int,
    rf: int,
    broker_ids: list[int],
    racks: dict[int, str] | None,
    start_index: int,
    replica_shift: int,
) -> np.ndarray:
    """Kafka's assignReplicasToBrokers for one topic (vectorized); returns (n_partitions, rf) broker ids.

    ``start_index``/``replica_shift`` are Kafka's random ``startIndex``/``nextReplicaShift``.
    """
    p = np.arange(n_partitions, dtype=np.int64)
    if not racks:
        arr = np.array(sorted(broker_ids), dtype=np.int64)
        n = len(arr)
        first = (p + start_index) % n
        out = np.empty((n_partitions, rf), dtype=np.int64)
        out[:, 0] = arr[first]
        if rf > 1:
            shift = replica_shift + p // n
            for j in range(rf - 1):
                out[:, j + 1] = arr[_replica_index(first, shift, j, n)]
        return out
    arranged = np.array(rack_alternated(broker_ids, racks), dtype=np.int64)
    n = len(arranged)
    rack_names = sorted(set(racks[b] for b in broker_ids))
    rack_of = np.array([rack_names.index(racks[b]) for b in arranged], dtype=np.int64)  # by arranged position
    n_racks = len(rack_names)
    first = (p + start_index) % n
    shift = (replica_shift + p // n) * n_racks
    out_pos = np.empty((n_partitions, rf), dtype=np.int64)
    out_pos[:, 0] = first
    has_rack = np.zeros((n_partitions, n_racks), dtype=bool)
    has_broker = np.zeros((n_partitions, n), dtype=bool)
    has_rack[p, rack_of[first]] = True
    has_broker[p, first] = True
    k = np.zeros(n_partitions, dtype=np.int64)
    for j in range(1, rf):
        pending = np.ones(n_partitions, dtype=bool)
        while pending.any():
            idx = np.nonzero(pending)[0]
            pos = _replica_index(first[idx], shift[idx], k[idx], n) if n > 1 else first[idx]
            r = rack_of[pos]
            racks_full = has_rack[idx].sum(axis=1) == n_racks
            brokers_full = has_broker[idx].sum(axis=1) == n
            ok = (~has_rack[idx, r] | racks_full) & (~has_broker[idx, pos] | brokers_full)
            take = idx[ok]
            out_pos[take, j] = pos[ok]
            has_rack[take, r[ok]] = True
            has_broker[take, pos[ok]] = True
            pending[take] = False
            k[idx] += 1
    return arranged[out_pos]


class _Arrays(NamedTuple):
    """A generated cluster as columns: broker ids, racks and capacities, then per partition."""

    ids: list[int]
    racks: dict[int, str] | None
    capacity: list[dict[str, float]]
    names: list[str]
    topic_of: np.ndarray
    part_ids: np.ndarray
    replicas: np.ndarray  # (partitions, rf) broker ids
    leaders: np.ndarray
    bytes_in: np.ndarray
    bytes_out: np.ndarray
    size: np.ndarray  # whole bytes


def generate(spec: ScenarioSpec) -> dict:
    """A snapshot dict in the planner's format; equal specs give equal snapshots."""
    a = _generate_arrays(spec)
    brokers = []
    for b, cap in zip(a.ids, a.capacity):
        entry: dict = {"id": b, "capacity": cap}
        if a.racks:
            entry["rack"] = a.racks[b]
        brokers.append(entry)
    rep_list = a.replicas.tolist()
    lead_list = a.leaders.tolist()
    bi, bo, sz = a.bytes_in.tolist(), a.bytes_out.tolist(), a.size.tolist()
    partitions = [
        {
            "topic": a.names[t],
            "partition": int(pid),
            "replicas": rep_list[i],
            "leader": lead_list[i],
            "bytes_in": bi[i],
            "bytes_out": bo[i],
            "size": sz[i],
        }
        for i, (t, pid) in enumerate(zip(a.topic_of.tolist(), a.part_ids.tolist()))
    ]
    return {"cluster": spec.cluster, "brokers": brokers, "partitions": partitions}


def generate_columnar(spec: ScenarioSpec) -> ColumnarSnapshot:
    """``generate(spec)`` as a :class:`ColumnarSnapshot` (same content), without a dict per partition:
    what a fleet-scale benchmark loads the way the job does."""
    a = _generate_arrays(spec)
    rf = a.replicas.shape[1]
    return ColumnarSnapshot(
        cluster=spec.cluster,
        broker_ids=np.array(a.ids, dtype=np.int64),
        racks=[a.racks[b] if a.racks else None for b in a.ids],
        capacity=np.array([[cap[r] for r in RESOURCES] for cap in a.capacity], dtype=np.float64),
        partition_ids=a.part_ids.astype(np.int64),
        replica_counts=np.full(len(a.leaders), rf, dtype=np.int64),
        replicas_flat=a.replicas.ravel(),
        leader=a.leaders,
        bytes_in=a.bytes_in,
        bytes_out=a.bytes_out,
        size=a.size.astype(np.float64),
        topic_names=a.names,
        topic_codes=a.topic_of,
    )


def _generate_arrays(spec: ScenarioSpec) -> _Arrays:
    rng = np.random.default_rng(spec.seed)
    n_old = spec.brokers
    n_all = n_old + spec.new_empty_brokers
    ids = list(range(n_all))
    racks = {b: f"rack-{b % spec.racks}" for b in ids} if spec.racks > 1 else None
    lo, hi = spec.partitions_per_topic
    counts = rng.integers(lo, hi + 1, size=spec.topics)
    rf = spec.replication_factor

    # Traffic: heavy-tailed per topic, lognormal hot keys inside a topic.
    topic_w = (rng.pareto(spec.skew, size=spec.topics) + 1.0) if spec.skew > 0 else np.ones(spec.topics)
    fanout = rng.uniform(0.5, 3.0, size=spec.topics)  # consumer groups reading each byte
    retention = _RETENTION_SECONDS[rng.integers(0, len(_RETENTION_SECONDS), size=spec.topics)]
    sigma = spec.hot_key_sigma if spec.skew > 0 else 0.0
    topic_of = np.repeat(np.arange(spec.topics), counts)
    part_w = topic_w[topic_of] / counts[topic_of] * rng.lognormal(0.0, sigma, size=topic_of.size)
    # The newer spec options draw from a stream of their own, so that specs without them
    # generate exactly the clusters they always did.
    extra = np.random.default_rng([spec.seed, 1])
    if spec.zipf_exponent is not None:
        zipf = (np.arange(1, spec.topics + 1, dtype=np.float64) ** -spec.zipf_exponent)[
            extra.permutation(spec.topics)
        ]
        part_w = part_w / topic_w[topic_of] * zipf[topic_of]  # same hot keys, Zipf topic weights
    bytes_in = spec.total_bytes_in * part_w / part_w.sum()
    bytes_out = bytes_in * fanout[topic_of]
    size = bytes_in * retention[topic_of]
    if spec.size_sigma > 0:
        size = size * extra.lognormal(0.0, spec.size_sigma, size=size.size)

    old_ids = ids[:n_old]
    old_racks = {b: racks[b] for b in old_ids} if racks else None
    if old_racks and len(set(old_racks.values())) < 2:
        old_racks = None
    blocks = []
    for t in range(spec.topics):
        start, shift = rng.integers(0, n_old, size=2)
        blocks.append(assign_replicas(int(counts[t]), rf, old_ids, old_racks, int(start), int(shift)))
    replicas = np.concatenate(blocks)
    leaders = replicas[:, 0].copy()
    if spec.restarted_broker is not None:
        # Controlled shutdown moved leadership to the next replica in assignment order.
        lost = leaders == spec.restarted_broker
        leaders[lost] = replicas[lost, 1] if rf > 1 else leaders[lost]

    # Capacities sized for a mean utilization; heterogeneous clusters mix 1x/1.5x/2x machines.
    mult = rng.choice([1.0, 1.5, 2.0], size=n_all) if spec.heterogeneous_capacity else np.ones(n_all)
    lo_load = bytes_out + bytes_in * (rf - 1)
    totals = {"network_in": bytes_in.sum() * rf, "network_out": lo_load.sum(), "disk": size.sum() * rf}
    target = {"network_in": spec.utilization, "network_out": spec.utilization, "disk": 0.5}
    capacity = [
        {k: float(totals[k] / target[k] * mult[i] / mult.sum()) for k in totals} for i in range(n_all)
    ]
    names = [f"topic-{t:04d}" for t in range(spec.topics)]
    part_ids = np.concatenate([np.arange(c) for c in counts])
    return _Arrays(
        ids,
        racks,
        capacity,
        names,
        topic_of,
        part_ids,
        replicas,
        leaders,
        bytes_in,
        bytes_out,
        np.round(size).astype(np.int64),
    )
