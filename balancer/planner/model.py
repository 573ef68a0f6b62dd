"""The cluster model: numpy arrays (partition x replica-slot), per-broker load updated incrementally.

Load model (Cruise Control's): every replica takes the partition's bytes_in (leaders from
producers, followers as replication); the leader serves bytes_out plus bytes_in x (RF - 1) to
followers; every replica stores ``size``.

One module, over 500 lines: every move the search makes updates the arrays and the per-broker loads
together, and keeping the incremental updates beside the arrays they keep consistent is what makes a
wrong update easy to see.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple, cast

import numpy as np
from numpy.typing import ArrayLike

from balancer.vocabulary import RESOURCES, ActionKind

from .actions import Move
from .options import PlannerOptions

# Local names for the hot loops (a global load, not an attribute lookup per move).
LEADERSHIP, REPLICA_MOVE, SWAP = ActionKind.LEADERSHIP, ActionKind.REPLICA_MOVE, ActionKind.SWAP

# Model dimensions: the three resources, then what the soft count/leader goals balance.
IN, OUT, DISK, LBIN, NREP, NLEAD = range(6)
DIMS = ("network_in", "network_out", "disk", "leader_bytes_in", "replicas", "leaders")
NDIM = len(DIMS)
MOVE_OVERHEAD_SHARE = 0.5  # of the mean partition size


class SnapshotError(ValueError):
    """The snapshot is malformed; the message says where and what."""


def _number(value: object, what: str, *, allow_zero: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SnapshotError(f"{what} must be a finite number, got {value!r}")
    if value < 0 or (not allow_zero and value == 0):
        raise SnapshotError(f"{what} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return float(value)


class ColumnarSnapshot(Mapping[str, Any]):
    """A snapshot held as numpy columns: what ``ClusterModel`` loads without a Python loop per partition.

    Same content as the dict snapshot (``{"cluster", "brokers", "partitions"}``), and readable as
    one: it is a read-only Mapping whose ``brokers``/``partitions`` lists are built on first access
    (for the CLI, plan validation, and the exact error message of a malformed snapshot).

    Brokers in any order (``capacity``: one row of RESOURCES per broker; ``racks``: a string or
    None each). Partition ``i``'s topic is ``topic_names[topic_codes[i]]`` (or give ``topics``, one
    name per partition), its replicas ``replicas_flat[offsets[i]:offsets[i + 1]]`` with
    ``offsets = cumsum(replica_counts)``; ``leader``, like the replicas, holds broker ids.
    """

    _KEYS = ("cluster", "brokers", "partitions")

    def __init__(
        self,
        *,
        cluster: str,
        broker_ids: ArrayLike,
        racks: Iterable[str | None],
        capacity: ArrayLike,
        partition_ids: ArrayLike,
        replica_counts: ArrayLike,
        replicas_flat: ArrayLike,
        leader: ArrayLike,
        bytes_in: ArrayLike,
        bytes_out: ArrayLike,
        size: ArrayLike,
        topics: Iterable[str] | None = None,
        topic_names: Iterable[str] | None = None,
        topic_codes: ArrayLike | None = None,
    ) -> None:
        self.cluster = cluster
        self.broker_ids = np.asarray(broker_ids)
        self.racks = list(racks)
        self.capacity = np.asarray(capacity, dtype=np.float64).reshape(len(self.broker_ids), len(RESOURCES))
        if topics is not None:
            codes: dict[str, int] = {}
            topic_codes = [codes.setdefault(t, len(codes)) for t in topics]
            topic_names = list(codes)
        if topic_names is None:
            raise TypeError("ColumnarSnapshot needs topics, or topic_names and topic_codes")
        self.topic_names = list(topic_names)
        self.topic_codes = np.asarray(topic_codes, dtype=np.int64)
        self.partition_ids = np.asarray(partition_ids)
        self.replica_counts = np.asarray(replica_counts, dtype=np.int64)
        self.replicas_flat = np.asarray(replicas_flat)
        self.leader = np.asarray(leader)
        self.bytes_in = np.asarray(bytes_in, dtype=np.float64)
        self.bytes_out = np.asarray(bytes_out, dtype=np.float64)
        self.size = np.asarray(size, dtype=np.float64)
        self._dict: dict[str, Any] | None = None

    def __getitem__(self, key: str) -> Any:
        if key == "cluster":
            return self.cluster
        if key not in self._KEYS:
            raise KeyError(key)
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._KEYS)

    def __len__(self) -> int:
        return len(self._KEYS)

    @property
    def topics(self) -> list[str]:
        """One topic name per partition."""
        names = self.topic_names
        return [names[c] for c in self.topic_codes.tolist()]

    def to_dict(self) -> dict[str, Any]:
        """The equivalent dict snapshot (built once)."""
        if self._dict is None:
            brokers = []
            for bid, rack, cap in zip(self.broker_ids.tolist(), self.racks, self.capacity.tolist()):
                entry = {"id": bid, "capacity": dict(zip(RESOURCES, cap))}
                if rack is not None:
                    entry["rack"] = rack
                brokers.append(entry)
            flat = self.replicas_flat.tolist()
            ends = np.cumsum(self.replica_counts).tolist()
            starts = [0] + ends[:-1]
            partitions = [
                {
                    "topic": t,
                    "partition": pid,
                    "replicas": flat[a:b],
                    "leader": lead,
                    "bytes_in": bi,
                    "bytes_out": bo,
                    "size": sz,
                }
                for t, pid, a, b, lead, bi, bo, sz in zip(
                    self.topics,
                    self.partition_ids.tolist(),
                    starts,
                    ends,
                    self.leader.tolist(),
                    self.bytes_in.tolist(),
                    self.bytes_out.tolist(),
                    self.size.tolist(),
                )
            ]
            self._dict = {"cluster": self.cluster, "brokers": brokers, "partitions": partitions}
        return self._dict


class _Parsed(NamedTuple):
    """A validated snapshot, brokers sorted by id, broker fields as indices into ``broker_ids``."""

    cluster: str
    broker_ids: np.ndarray  # sorted
    racks: list[str | None]  # per sorted broker: rack name or None
    cap3: np.ndarray  # (brokers, 3)
    topics: list[str]
    partition_ids: np.ndarray
    replicas: np.ndarray  # (partitions, max RF), -1 padded
    rf: np.ndarray
    leader: np.ndarray
    bytes_in: np.ndarray
    bytes_out: np.ndarray
    size: np.ndarray


def _parse_dicts(snapshot: Mapping[str, Any]) -> _Parsed:  # noqa: C901 - one check per field of the snapshot, naming it
    """Validate a dict snapshot, with a message naming the first bad field."""
    if not isinstance(snapshot, Mapping):
        raise SnapshotError(f"snapshot must be a JSON object, got {type(snapshot).__name__}")
    brokers = snapshot.get("brokers")
    partitions = snapshot.get("partitions")
    if not isinstance(brokers, list) or not brokers:
        raise SnapshotError("snapshot.brokers must be a non-empty list")
    if not isinstance(partitions, list):
        raise SnapshotError("snapshot.partitions must be a list")

    ids, racks, caps = [], [], []
    for i, b in enumerate(brokers):
        if not isinstance(b, Mapping):
            raise SnapshotError(f"brokers[{i}] must be an object")
        bid = b.get("id")
        if isinstance(bid, bool) or not isinstance(bid, int):
            raise SnapshotError(f"brokers[{i}].id must be an int, got {bid!r}")
        cap = b.get("capacity")
        if not isinstance(cap, Mapping):
            raise SnapshotError(f"brokers[{i}] (id {bid}): missing capacity object")
        caps.append(
            [
                _number(cap.get(r), f"brokers[{i}] (id {bid}).capacity.{r}", allow_zero=False)
                for r in RESOURCES
            ]
        )
        rack = b.get("rack")
        if rack is not None and not isinstance(rack, str):
            raise SnapshotError(f"brokers[{i}] (id {bid}).rack must be a string, got {rack!r}")
        ids.append(bid)
        racks.append(rack or None)
    if len(set(ids)) != len(ids):
        dup = sorted({x for x in ids if ids.count(x) > 1})
        raise SnapshotError(f"duplicate broker id(s) in snapshot.brokers: {dup}")
    order = sorted(range(len(ids)), key=ids.__getitem__)
    broker_ids = np.array([ids[i] for i in order], dtype=np.int64)
    index = {int(b): k for k, b in enumerate(broker_ids)}

    n = len(partitions)
    rf_max = 1
    rows: list[list[int]] = []
    lead = np.empty(n, dtype=np.int64)
    bin_ = np.empty(n, dtype=np.float64)
    bout = np.empty(n, dtype=np.float64)
    size = np.empty(n, dtype=np.float64)
    topics: list[str] = []
    pids = np.empty(n, dtype=np.int64)
    seen: set[tuple[str, int]] = set()
    for i, p in enumerate(partitions):
        if not isinstance(p, Mapping):
            raise SnapshotError(f"partitions[{i}] must be an object")
        topic, pid = p.get("topic"), p.get("partition")
        if not isinstance(topic, str) or not topic:
            raise SnapshotError(f"partitions[{i}].topic must be a non-empty string, got {topic!r}")
        if isinstance(pid, bool) or not isinstance(pid, int) or pid < 0:
            raise SnapshotError(
                f"partitions[{i}] (topic {topic!r}).partition must be an int >= 0, got {pid!r}"
            )
        where = f"partitions[{i}] ({topic}-{pid})"
        key = (topic, pid)
        if key in seen:
            raise SnapshotError(f"{where}: listed twice")
        seen.add(key)
        reps = p.get("replicas")
        if not isinstance(reps, list) or not reps:
            raise SnapshotError(f"{where}.replicas must be a non-empty list of broker ids, got {reps!r}")
        try:
            row = [index[b] for b in reps]
        except (KeyError, TypeError):
            unknown = [b for b in reps if not isinstance(b, int) or b not in index]
            raise SnapshotError(f"{where}: unknown broker(s) {unknown} in replicas {reps}") from None
        if len(set(row)) != len(row):
            raise SnapshotError(f"{where}: duplicate replica in {reps}")
        leader = p.get("leader")
        if leader not in reps or isinstance(leader, bool):
            raise SnapshotError(f"{where}: leader {leader!r} is not among replicas {reps}")
        lead[i] = index[cast(int, leader)]  # among the replicas: a known broker id
        bin_[i] = _number(p.get("bytes_in"), f"{where}.bytes_in")
        bout[i] = _number(p.get("bytes_out"), f"{where}.bytes_out")
        size[i] = _number(p.get("size"), f"{where}.size")
        rows.append(row)
        topics.append(topic)
        pids[i] = pid
        if len(row) > rf_max:
            rf_max = len(row)
    reps_arr = np.full((n, rf_max), -1, dtype=np.int64)
    rf = np.fromiter((len(r) for r in rows), dtype=np.int64, count=n)
    if n and (rf == rf_max).all():
        reps_arr[:] = np.array(rows, dtype=np.int64).reshape(n, rf_max)
    else:
        for i, r in enumerate(rows):
            reps_arr[i, : len(r)] = r
    return _Parsed(
        str(snapshot.get("cluster", "")),
        broker_ids,
        [racks[i] for i in order],
        np.array([caps[i] for i in order], dtype=np.float64),
        topics,
        pids,
        reps_arr,
        rf,
        lead,
        bin_,
        bout,
        size,
    )


def _parse_columns(s: ColumnarSnapshot) -> _Parsed | None:
    """``_parse_dicts`` vectorized for a well-formed columnar snapshot; None if any check fails
    (the caller then reads it as dicts, which names the first bad field)."""
    ids, n = s.broker_ids, len(s.topic_codes)
    if not len(ids) or ids.dtype.kind not in "iu" or len(np.unique(ids)) != len(ids):
        return None
    cap = s.capacity
    if not (np.isfinite(cap).all() and (cap > 0).all()):
        return None
    if any(r is not None and not isinstance(r, str) for r in s.racks):
        return None
    counts = s.replica_counts
    arrays = (s.partition_ids, counts, s.leader, s.bytes_in, s.bytes_out, s.size)
    if any(len(a) != n for a in arrays) or len(s.replicas_flat) != int(counts.sum()):
        return None
    if n and (
        s.partition_ids.dtype.kind not in "iu"
        or s.leader.dtype.kind not in "iu"
        or s.replicas_flat.dtype.kind not in "iu"
        or (s.partition_ids < 0).any()
        or (counts < 1).any()
    ):
        return None
    for v in (s.bytes_in, s.bytes_out, s.size):
        if not (np.isfinite(v).all() and (v >= 0).all()):
            return None
    names, codes = s.topic_names, s.topic_codes
    if not all(isinstance(t, str) and t for t in names) or len(set(names)) != len(names):
        return None
    if n and (codes.min() < 0 or codes.max() >= len(names)):
        return None
    order = np.argsort(ids, kind="stable")
    broker_ids = ids[order].astype(np.int64)
    pids = s.partition_ids.astype(np.int64)
    if n:
        key = codes * (int(pids.max()) + 1) + pids
        if not (key[1:] > key[:-1]).all() and len(np.unique(key)) != n:
            return None  # a partition listed twice
    flat = s.replicas_flat.astype(np.int64)
    pos = np.minimum(np.searchsorted(broker_ids, flat), len(broker_ids) - 1)
    if not (broker_ids[pos] == flat).all():
        return None  # unknown broker
    rf_max = int(counts.max()) if n else 1
    reps = np.full((n, rf_max), -1, dtype=np.int64)
    starts = np.cumsum(counts) - counts
    reps[np.repeat(np.arange(n), counts), np.arange(len(flat)) - np.repeat(starts, counts)] = pos
    if (distinct_per_row(reps) != counts).any():
        return None  # duplicate replica
    leader = s.leader.astype(np.int64)
    lpos = np.minimum(np.searchsorted(broker_ids, leader), len(broker_ids) - 1)
    if not ((broker_ids[lpos] == leader) & (reps == lpos[:, None]).any(axis=1)).all():
        return None  # leader not among the replicas
    return _Parsed(
        s.cluster,
        broker_ids,
        [s.racks[i] or None for i in order.tolist()],
        cap[order],
        s.topics,
        pids,
        reps,
        counts.copy(),
        lpos.astype(np.int64),
        s.bytes_in.copy(),
        s.bytes_out.copy(),
        s.size.copy(),
    )


class ClusterModel:
    """Mutable planning state. Broker fields are indices into ``broker_ids`` (sorted ids)."""

    def __init__(self, snapshot: Mapping[str, Any], options: PlannerOptions | None = None) -> None:
        """``snapshot``: a dict snapshot, or a :class:`ColumnarSnapshot` (same content, same
        errors, loaded with numpy instead of a Python loop per partition)."""
        options = options or PlannerOptions()
        parsed = _parse_columns(snapshot) if isinstance(snapshot, ColumnarSnapshot) else None
        if parsed is None:
            parsed = _parse_dicts(snapshot)
        self.cluster = parsed.cluster
        self.broker_ids = parsed.broker_ids
        index = {int(b): k for k, b in enumerate(self.broker_ids.tolist())}
        self.index = index
        nb = len(self.broker_ids)
        racks = parsed.racks
        rack_names = sorted({r for r in racks if r is not None})
        self.rack_aware = bool(rack_names)
        # A broker without a rack is a rack of its own: never colocated with anyone.
        rank = {r: k for k, r in enumerate(rack_names)}
        self.rack = np.array(
            [rank[r] if r is not None else len(rack_names) + k for k, r in enumerate(racks)], dtype=np.int64
        )
        self.n_racks = len(set(self.rack.tolist()))
        self.rack_names = rack_names
        cap3 = parsed.cap3

        n = len(parsed.topics)
        topics = parsed.topics
        rf, bin_, bout, size, lead = parsed.rf, parsed.bytes_in, parsed.bytes_out, parsed.size, parsed.leader
        reps_arr = parsed.replicas
        self.topics = topics
        self.partition_ids = parsed.partition_ids
        self.replicas = reps_arr
        self.leader = lead
        self.rf = rf
        self.bytes_in = bin_
        self.bytes_out = bout
        self.size = size
        self.leader_out: np.ndarray = bout + bin_ * (rf - 1)  # network_out a leader serves
        # Fixed cost charged per replica move when ranking candidates (not in bytes_to_move):
        # without it, "relief per byte" prefers hundreds of tiny moves to a few useful ones.
        self.move_overhead = MOVE_OVERHEAD_SHARE * float(size.mean()) + 1.0 if n else 1.0
        self.orig_replicas = reps_arr.copy()
        self.orig_leader = lead.copy()

        self.cap = np.ones((nb, NDIM), dtype=np.float64)
        self.cap[:, :3] = cap3
        self.cap[:, LBIN] = cap3[:, IN]
        self.load = self._compute_load()

        # Planning constraints.
        self.options = options
        # An excluded broker absent from this snapshot (decommissioned, silent) can receive
        # nothing anyway: ignored rather than failing every plan of a long-running job.
        self.dest_ok = np.ones(nb, dtype=bool)
        for b in options.excluded_brokers:
            if b in index:
                self.dest_ok[index[b]] = False
        # A drained broker gives up everything and receives nothing. One absent from the snapshot
        # holds nothing already.
        self.drained = np.zeros(nb, dtype=bool)
        for b in options.drain_brokers:
            if b in index:
                self.drained[index[b]] = True
        self.dest_ok &= ~self.drained
        self.live = ~self.drained
        stay = self.live if self.live.any() else np.ones(nb, dtype=bool)
        self._live_cap = [float(self.cap[stay, d].sum()) for d in range(NDIM)]
        # Racks a partition can span once the drain is done: racks with a broker that stays.
        live = self.rack[~self.drained]
        self.n_live_racks = len(set(live.tolist())) if len(live) else self.n_racks
        if options.excluded_topics is None:
            self.movable = np.ones(n, dtype=bool)
        else:
            excluded = {t for t in set(topics) if options.topic_excluded(t)}
            self.movable = np.fromiter((t not in excluded for t in topics), dtype=bool, count=n)
        self.bytes_moved = 0.0
        self.broker_moves = np.zeros(nb, dtype=np.int64)
        self.touched: dict[int, None] = {}  # insertion-ordered set of changed partitions
        self.swapped: set[int] = set()
        self.moves_applied = 0
        self.log: list[Move] = []  # every move applied, in order (for undo)
        # Traffic swaps made that a capped search (PlannerOptions.swap_data_cap) would refuse:
        # ``plan`` runs that search only where the first made some.
        self.wide_swaps = 0
        # Bytes the traffic fills in the cost order would have copied less data first, where by more
        # than the data slack (PlannerOptions.fill_data_first): ``plan`` runs that search only where
        # the first would have saved much.
        self.wide_fills = 0.0
        # Bytes traffic fills took off brokers within the disk goal's line while brokers over it could
        # have given them (PlannerOptions.fill_disk_excess): ``plan`` runs that search only where
        # they are many.
        self.disk_fills = 0.0
        # Memos for the search's hot scalar calls; ``_version`` counts applied moves.
        self._version = 0
        self._delta_memo: tuple[int, Move, np.ndarray | None, list[float]] | None = None
        self._room_memo: dict[int, np.ndarray] = {}
        self._bound_memo: dict[int, float] = {}
        self._cluster_util_memo: tuple[int, dict[int, float]] = (-1, {})
        self._violations_memo: tuple[int, np.ndarray] = (-1, np.zeros(0, dtype=np.int64))
        self._rack_of: list[int] = self.rack.tolist()
        self._cold: dict[tuple[int, tuple[int, float] | None], ColdOrder] = {}  # ``coldest``
        self._on_cache: dict[int, np.ndarray] = {}  # partitions_on, per broker
        # Per cached broker, the partitions whose replica reached (True) or left (False) it since
        # its entry was made, in order: folded into the entry when it is next asked for.
        self._on_changes: dict[int, list[tuple[int, bool]]] = {}

    # ---- load -------------------------------------------------------------------------
    def _compute_load(self) -> np.ndarray:
        nb = len(self.broker_ids)
        load = np.zeros((nb, NDIM), dtype=np.float64)
        flat = self.replicas.ravel()
        ok = flat >= 0
        fb = flat[ok]

        def per(v: np.ndarray) -> np.ndarray:
            return np.broadcast_to(v[:, None], self.replicas.shape).ravel()[ok]

        load[:, IN] = np.bincount(fb, weights=per(self.bytes_in), minlength=nb)
        load[:, DISK] = np.bincount(fb, weights=per(self.size), minlength=nb)
        load[:, NREP] = np.bincount(fb, minlength=nb)
        load[:, OUT] = np.bincount(self.leader, weights=self.leader_out, minlength=nb)
        load[:, LBIN] = np.bincount(self.leader, weights=self.bytes_in, minlength=nb)
        load[:, NLEAD] = np.bincount(self.leader, minlength=nb)
        return load

    @property
    def n_brokers(self) -> int:
        return len(self.broker_ids)

    @property
    def n_partitions(self) -> int:
        return len(self.rf)

    def util(self, dim: int) -> np.ndarray:
        return self.load[:, dim] / self.cap[:, dim]

    def coldest(self, dim: int, within: tuple[int, float] | None = None) -> list[tuple[float, int]] | None:
        """(utilization on ``dim``, broker) of the brokers that may receive, ascending (ties by
        index, as a stable argsort gives them); with ``within`` (a dimension, a line), only those
        whose utilization there is at most the line. None where a utilization is NaN (no order)."""
        order = self._cold.get((dim, within))
        if order is None:
            order = self._cold[(dim, within)] = ColdOrder(self, dim, within)
        return order.brokers(self)

    @property
    def rack_of(self) -> list[int]:
        """Each broker's rack index, as Python ints (read one at a time in the search's loops)."""
        return self._rack_of

    def cluster_util(self, dim: int) -> float:
        memo = self._cluster_util_memo
        if memo[0] != self._version:  # loads changed (rounding can move the sums): recompute
            memo = self._cluster_util_memo = (self._version, {})
        value = memo[1].get(dim)
        if value is None:
            # Over the brokers that stay: a drained broker's capacity is leaving with it.
            # ``np.add.reduce``: what ``ndarray.sum`` runs, without its Python wrapper (asked after
            # every move).
            value = memo[1][dim] = float(np.add.reduce(self.load[:, dim]) / self._live_cap[dim])
        return value

    def balance(self, dim: int) -> float:
        """Max utilization / cluster utilization (1.0 is perfect; 1.0 for an idle resource)."""
        avg = self.cluster_util(dim)
        return float(self.util(dim).max() / avg) if avg > 0 else 1.0

    def _per_replica(self, dim: int) -> np.ndarray | None:
        return {IN: self.bytes_in, DISK: self.size, NREP: np.ones(self.n_partitions)}.get(dim)

    def rack_floor(self, dim: int) -> np.ndarray:
        """Per broker: the least utilization its rack can average while rack awareness holds.

        With RF >= racks, every rack must keep a replica of each partition, so a rack's
        replica-borne load (network_in, disk, replica count) cannot go below that.
        """
        floor = np.zeros(self.n_brokers)
        per = self._per_replica(dim)
        if not self.rack_aware or per is None or self.n_live_racks < 2:
            return floor
        forced = (self.rf >= self.n_live_racks).astype(np.float64)
        need = float((per * forced).sum())
        if need <= 0:
            return floor
        for r in np.unique(self.rack[self.live]).tolist():
            members = (self.rack == r) & self.live
            floor[members] = need / self.cap[members, dim].sum()
        return floor

    def rack_ceiling(self, dim: int) -> np.ndarray:
        """Per broker: the most utilization its rack can average while rack awareness holds.

        A partition spanning rf <= racks racks puts at most one replica in each rack.
        """
        ceiling = np.full(self.n_brokers, np.inf)
        per = self._per_replica(dim)
        if not self.rack_aware or per is None or self.n_live_racks < 2:
            return ceiling
        most = np.where(self.rf <= self.n_live_racks, 1.0, self.rf.astype(np.float64))
        room = float((per * most).sum())
        for r in np.unique(self.rack[self.live]).tolist():
            members = (self.rack == r) & self.live
            ceiling[members] = room / self.cap[members, dim].sum()
        return ceiling

    def rack_level(self, dim: int) -> np.ndarray:
        """Per broker: the least utilization its rack must average while no rack exceeds its ceiling
        (0 for a full rack's brokers, which carry no more than their ceiling).

        A rack that cannot hold its share (one replica per partition, ``rack_ceiling``) leaves the
        rest to the other racks: the level u where racks filled to min(ceiling, u) hold all the load.
        """
        ceiling = self.rack_ceiling(dim)
        avg = self.cluster_util(dim)
        if not np.isfinite(ceiling).any():
            return np.full(self.n_brokers, avg)
        live = self.live if self.live.any() else np.ones(self.n_brokers, dtype=bool)
        racks = sorted(
            (float(ceiling[members][0]), float(self.cap[members, dim].sum()))
            for members in ((self.rack == r) & live for r in np.unique(self.rack[live]).tolist())
        )
        rest, level = float(self.load[:, dim].sum()), float(racks[-1][0])  # every rack full
        for i, (top, cap) in enumerate(racks):
            room = float(sum(c for _, c in racks[i:]))  # summed afresh: a running difference drifts
            if top * room >= rest * (1.0 - 1e-12):
                level = max(avg, rest / room)
                break
            rest -= top * cap
        return np.where(ceiling >= level * (1.0 - 1e-9), level, 0.0)

    def partition_load(self, dim: int) -> np.ndarray | None:
        """Per partition: what it puts on a broker carrying it, by traffic or size (every replica's
        network_in and size; its leader's network_out and leader bytes in); None for counts."""
        return {IN: self.bytes_in, OUT: self.leader_out, DISK: self.size, LBIN: self.bytes_in}.get(dim)

    def partition_room(self, dim: int) -> np.ndarray:
        """Per partition: the most capacity the least of its brokers can have, whatever the plan.

        A partition whose every replica carries the load (network_in, disk) puts it on rf distinct
        brokers, in k = min(rf, racks) distinct racks once rack awareness holds (this, like the
        racks' bounds, is for plans that meet the hard goals): at best on the biggest such brokers,
        the smallest of which carries it, so one with a capacity at most the rf-th biggest broker's
        and the k-th biggest of the racks' biggest brokers'. A leader's load (network_out, leader
        bytes in) at best on the biggest broker. Capacities and replication factors never change
        under moves: computed once per dimension.
        """
        memo = self._room_memo.get(dim)
        if memo is not None:
            return memo
        caps = np.sort(self.cap[:, dim])[::-1]
        if dim in (OUT, LBIN) or self.n_partitions == 0:
            room = np.full(self.n_partitions, caps[0])
        else:
            room = caps[np.minimum(self.rf, len(caps)).clip(min=1) - 1]
            if self.rack_aware and self.n_live_racks >= 2:
                live = self.live if self.live.any() else np.ones(self.n_brokers, dtype=bool)
                tops = np.sort(
                    [
                        float(self.cap[(self.rack == r) & live, dim].max())
                        for r in np.unique(self.rack[live]).tolist()
                    ]
                )[::-1]
                room = np.minimum(room, tops[np.minimum(self.rf, len(tops)).clip(min=1) - 1])
        room.flags.writeable = False
        self._room_memo[dim] = room
        return room

    def partition_floor(self, dim: int) -> tuple[int, float]:
        """(the partition, the utilization) of the biggest load one partition alone puts on some
        broker whatever the plan (``partition_room``); (-1, 0.0) without partitions or such load.
        (The search asks ``lower_bound``, which keeps its figure.)"""
        per = self.partition_load(dim)
        if per is None or self.n_partitions == 0:
            return -1, 0.0
        floors = per / self.partition_room(dim)
        p = int(np.argmax(floors))
        return p, float(floors[p])

    def lower_bound(self, dim: int) -> float:
        """No plan beats 1.0, nor the biggest partition's floor (``partition_floor``), nor a rack's
        floor, nor the level racks that cannot hold their share leave the others (``rack_level``).
        Moves change none of these (nor the cluster's total load): computed once per dimension."""
        memo = self._bound_memo.get(dim)
        if memo is not None:
            return memo
        avg = self.cluster_util(dim)
        if avg <= 0 or self.n_partitions == 0:
            bound = 1.0
        else:
            bound = max(
                1.0,
                self.partition_floor(dim)[1] / avg,
                float(self.rack_floor(dim).max() / avg),
                float(self.rack_level(dim).max() / avg),
            )
        self._bound_memo[dim] = bound
        return bound

    def contrib(self, p: int, b: int) -> np.ndarray:
        """What partition ``p``'s replica on broker ``b`` adds to b's load, per dimension."""
        return np.array(self._contrib_items(p, b))

    def _contrib_items(self, p: int, b: int) -> list[float]:
        """``contrib`` as Python floats (the same values)."""
        led = 1.0 if self.leader.item(p) == b else 0.0
        bi = self.bytes_in.item(p)
        return [bi, self.leader_out.item(p) * led, self.size.item(p), bi * led, 1.0, led]

    def contrib_matrix(self, ps: np.ndarray, b: int | np.ndarray) -> np.ndarray:
        """``contrib`` for many partitions on one broker, or each on its own (``b`` an array like
        ``ps``): (len(ps), NDIM)."""
        return np.column_stack(self._contrib_parts(ps, b))

    def contrib_columns(self, ps: np.ndarray, b: int | np.ndarray) -> np.ndarray:
        """``contrib_matrix(ps, b).T`` built as such, contiguous: (NDIM, len(ps))."""
        return np.stack(self._contrib_parts(ps, b))

    def _contrib_parts(self, ps: np.ndarray, b: int | np.ndarray) -> list[np.ndarray]:
        led = (self.leader[ps] == b).astype(np.float64)
        bi = self.bytes_in[ps]
        return [bi, self.leader_out[ps] * led, self.size[ps], bi * led, np.ones(len(ps)), led]

    def delta(self, move: Move) -> np.ndarray:
        """Load that ``move`` takes from ``src`` and gives to ``dst`` (negative: the other way).

        Read-only, and remembered for the last move until the next ``apply``: every optimized
        goal's ``accept`` asks for the same move's delta in turn. Made from ``delta_items`` only when
        asked for: most moves the checks judge are refused, and the checks read the items.
        """
        memo = self._delta_memo
        if memo is None or memo[0] != self._version or memo[1] != move:
            memo = self._remember_delta(move)
        vec = memo[2]
        if vec is None:
            vec = np.array(memo[3])
            vec.flags.writeable = False
            self._delta_memo = (memo[0], memo[1], vec, memo[3])
        return vec

    def delta_items(self, move: Move) -> list[float]:
        """``delta`` as Python floats (the same values): the per-move checks read one dimension at a
        time, and a list's item costs a fraction of ``ndarray.item``. Remembered as ``delta`` is."""
        memo = self._delta_memo
        if memo is None or memo[0] != self._version or memo[1] != move:
            memo = self._remember_delta(move)
        return memo[3]

    def _remember_delta(self, move: Move) -> tuple[int, Move, np.ndarray | None, list[float]]:
        if move.kind == LEADERSHIP:
            p = move.p
            items = [0.0, self.leader_out.item(p), 0.0, self.bytes_in.item(p), 0.0, 1.0]
        else:
            items = self._contrib_items(move.p, move.src)
            if move.kind == SWAP:
                # Python's float subtraction: numpy's, element by element.
                back = self._contrib_items(move.q, move.dst)
                items = [x - y for x, y in zip(items, back, strict=True)]
        memo = self._delta_memo = (self._version, move, None, items)
        return memo

    def holds(self, p: int, b: int) -> bool:
        return b in self.replicas[p].tolist()

    def partitions_on(self, b: int) -> np.ndarray:
        """Sorted indices of the partitions with a replica on ``b`` (read-only; kept until a
        replica moves on or off ``b``: the search asks for the same broker many times)."""
        if not self._on_cache:
            self._cache_every_broker()
        got = self._on_cache.get(b)
        if got is None:
            # Replicas of a partition are distinct brokers, so each row matches at most once and
            # the flat positions' rows come out sorted and unique.
            got = np.flatnonzero(self.replicas.ravel() == b) // self.replicas.shape[1]
        elif b in self._on_changes:
            # A partition's last change says whether it is on ``b`` now: a scan of every replica
            # would cost far more than the few that moved.
            last = dict(self._on_changes.pop(b))
            left = np.array([p for p, on in last.items() if not on], dtype=got.dtype)
            if len(left) and len(got):
                at = np.minimum(np.searchsorted(got, left), len(got) - 1)
                keep = np.ones(len(got), dtype=bool)
                keep[at[got[at] == left]] = False
                got = got[keep]
            reached = np.sort(np.array([p for p, on in last.items() if on], dtype=got.dtype))
            if len(reached):
                at = np.searchsorted(got, reached)
                new = got[np.minimum(at, len(got) - 1)] != reached if len(got) else np.ones(len(at), bool)
                got = np.insert(got, at[new], reached[new])
        else:
            return got
        got.flags.writeable = False
        self._on_cache[b] = got
        return got

    def _cache_every_broker(self) -> None:
        """Every broker's ``partitions_on`` entry at once, as the first is asked for: the search
        asks for nearly every broker, and one stable sort of the replica slots by broker costs
        about as much as a few scans of them (each broker's slots, hence rows, come out ascending)."""
        flat = self.replicas.ravel()
        # Broker indices (and -1) fit the smallest signed type holding -n_brokers, and numpy's stable
        # sort of such small integers is a radix sort: the same order, at a fraction of the cost.
        small = flat.astype(np.min_scalar_type(-self.n_brokers))
        rows = np.argsort(small, kind="stable") // self.replicas.shape[1]
        counts = np.bincount(flat[flat >= 0], minlength=self.n_brokers).tolist()
        start = len(flat) - sum(counts)  # the empty slots (-1) sort first
        for b, count in enumerate(counts):
            got = rows[start : start + count]
            got.flags.writeable = False
            self._on_cache[b] = got
            start += count

    def _moved_on(self, p: int, src: int, dst: int) -> None:
        """Note for ``partitions_on`` that ``p``'s replica left ``src`` for ``dst``."""
        for b, on in ((src, False), (dst, True)):
            if b in self._on_cache:
                self._on_changes.setdefault(b, []).append((p, on))

    # ---- bookkeeping for caps ------------------------------------------------------------
    def _move_replica(self, p: int, src: int, dst: int) -> None:
        """``p``'s replica on ``src`` (and its leadership, if it leads) goes to ``dst``."""
        self._moved_on(p, src, dst)
        row = self.replicas[p]  # a view: written in place, one slot at a time (a row is a few slots)
        for i, b in enumerate(row.tolist()):
            if b == src:
                row[i] = dst
        if self.leader.item(p) == src:
            self.leader[p] = dst

    def cost_after(self, move: Move) -> tuple[float, dict[int, int]]:
        """(bytes moved by the plan, per-broker move counts changed) if ``move`` were applied."""
        if move.kind == LEADERSHIP:
            return self.bytes_moved, {}
        changes = [(move.p, move.src, move.dst)]
        if move.kind == SWAP:
            changes.append((move.q, move.dst, move.src))
        total = self.bytes_moved
        counts: dict[int, int] = {}
        moves = self.broker_moves
        for p, src, dst in changes:
            old = set(self.orig_replicas[p].tolist())
            old.discard(-1)
            row = self.replicas[p].tolist()
            size = self.size.item(p)
            for sign, new in (
                (-1, {b for b in row if b >= 0}),
                (1, {dst if b == src else b for b in row if b >= 0}),
            ):
                removed, added = old - new, new - old
                total += sign * len(added) * size
                for b in removed | added:
                    counts[b] = (counts[b] if b in counts else moves.item(b)) + sign
        return total, counts

    def allowed(self, move: Move) -> bool:
        """Excluded topics never move; excluded brokers receive nothing (a swap gives src a replica)."""
        if not self.movable[move.p] or not self.dest_ok[move.dst]:
            return False
        return move.kind != SWAP or bool(self.movable[move.q] and self.dest_ok[move.src])

    def within_caps(self, move: Move) -> bool:
        opts = self.options
        if opts.max_bytes_to_move is None and opts.max_moves_per_broker is None:
            return True
        total, counts = self.cost_after(move)
        if opts.max_bytes_to_move is not None and total > opts.max_bytes_to_move:
            return False
        return opts.max_moves_per_broker is None or not any(
            c > opts.max_moves_per_broker and c > self.broker_moves[b] for b, c in counts.items()
        )

    def apply(self, move: Move) -> None:
        total, counts = self.cost_after(move)
        vec = self.delta(move)
        self._version += 1  # loads, replicas, leaders change: memoized figures are stale
        self.load[move.src] -= vec
        self.load[move.dst] += vec
        for order in self._cold.values():
            order.pending.update((move.src, move.dst))
        p = move.p
        if move.kind == LEADERSHIP:
            self.leader[p] = move.dst
        else:
            self._move_replica(p, move.src, move.dst)
            if move.kind == SWAP:
                q = move.q
                self._move_replica(q, move.dst, move.src)
                self.touched.setdefault(q, None)
                self.swapped.update((p, q))
        self.touched.setdefault(p, None)
        self.bytes_moved = total
        for b, c in counts.items():
            self.broker_moves[b] = c
        self.moves_applied += 1
        self.log.append(move)

    def undo_to(self, mark: int, swapped: set[int]) -> None:
        """Revert every move applied since ``len(self.log) == mark`` (``swapped``: the set saved then)."""
        for move in reversed(self.log[mark:]):
            if move.kind == LEADERSHIP:
                self.apply(Move(LEADERSHIP, move.p, move.dst, move.src))
            else:
                self.apply(Move(move.kind, move.p, move.dst, move.src, move.q))
        del self.log[mark:]
        self.swapped = swapped

    # ---- racks -------------------------------------------------------------------------
    def rack_target(self, p: int) -> int:
        rf: int = self.rf.item(p)
        return min(rf, self.n_live_racks)

    def racks_kept(self, p: int, src: int, dst: int) -> tuple[int, int]:
        """(the racks ``p``'s replicas span, the racks they span once its replica on ``src`` is on
        ``dst``)."""
        rack = self._rack_of
        row = self.replicas[p].tolist()
        before = {rack[b] for b in row if b >= 0}
        after = {rack[dst if b == src else b] for b in row if b >= 0}
        return len(before), len(after)

    def distinct_racks(self, row: np.ndarray) -> int:
        rack = self._rack_of
        return len({rack[b] for b in row.tolist() if b >= 0})

    def other_racks(self, p: int, src: int) -> set[int]:
        """The racks of ``p``'s replicas other than the one on ``src``."""
        rack = self._rack_of
        return {rack[b] for b in self.replicas[p].tolist() if b >= 0 and b != src}

    def rack_violations(self) -> np.ndarray:
        """Indices of partitions whose replicas span fewer racks than they could (read-only; kept
        until the next ``apply``: each goal's run asks before and after, and most runs move nothing
        between one goal's ask and the next's, over every replica of the cluster)."""
        if not self.rack_aware or self.n_partitions == 0:
            return np.zeros(0, dtype=np.int64)
        memo = self._violations_memo
        if memo[0] != self._version:
            distinct = distinct_per_row(
                np.where(self.replicas >= 0, self.rack[np.maximum(self.replicas, 0)], -1)
            )
            found = np.nonzero(distinct < np.minimum(self.rf, self.n_live_racks))[0]
            found.flags.writeable = False
            memo = self._violations_memo = (self._version, found)
        return memo[1]


class ColdOrder:
    """The brokers that may receive (``dest_ok``, fixed for a model), coldest first on one
    dimension, ties by index: the order a stable argsort of their utilization gives. With
    ``within`` (a dimension and a line), only those whose utilization there is at most the line.
    Kept in step with the model's loads: ``apply`` notes the two brokers a move touches
    (``pending``), placed again at the next call. It keeps no reference to the model (which keeps
    it): the model is freed as soon as its last user lets go, not at the next garbage collection."""

    def __init__(self, model: ClusterModel, dim: int, within: tuple[int, float] | None) -> None:
        self.dim, self.within = dim, within
        self.ok = model.dest_ok.tolist()
        self.nan = False  # a NaN utilization: no total order, which bisection needs
        self.pending: set[int] = set()
        util = model.util(dim).tolist()
        self.keys = [(u, b) for b, u in enumerate(util) if self._member(model, b, u)]
        self.keys.sort()
        self.at = dict((b, u) for u, b in self.keys)  # each member's key

    def _member(self, model: ClusterModel, b: int, u: float) -> bool:
        """``b``, at utilization ``u`` on the order's dimension, belongs in it."""
        if not self.ok[b]:
            return False
        within = self.within
        # Python floats: the IEEE division numpy's ``util`` does, element by element.
        r = model.load.item(b, within[0]) / model.cap.item(b, within[0]) if within is not None else 0.0
        if math.isnan(u) or math.isnan(r):
            self.nan = True
            return False
        return within is None or r <= within[1]

    def brokers(self, model: ClusterModel) -> list[tuple[float, int]] | None:
        """(utilization, broker), ascending, on ``model`` (the one this order was made for); None
        where a utilization is NaN."""
        if self.pending:
            keys, at, dim = self.keys, self.at, self.dim
            for b in self.pending:
                old = at.pop(b, None)
                if old is not None:
                    del keys[bisect_left(keys, (old, b))]
                u = model.load.item(b, dim) / model.cap.item(b, dim)
                if self._member(model, b, u):
                    insort(keys, (u, b))
                    at[b] = u
            self.pending.clear()
        return None if self.nan else self.keys


def broker_loads(snapshot: Mapping[str, Any]) -> dict[int, dict[str, float]]:
    """Per broker id: network_in, network_out, disk (B/s, B/s, bytes), replicas, leaders."""
    model = ClusterModel(snapshot)
    out = {}
    for k, b in enumerate(model.broker_ids.tolist()):
        row = model.load[k]
        out[b] = {
            "network_in": float(row[IN]),
            "network_out": float(row[OUT]),
            "disk": float(row[DISK]),
            "replicas": float(row[NREP]),
            "leaders": float(row[NLEAD]),
        }
    return out


def distinct_per_row(values: np.ndarray) -> np.ndarray:
    """Per row of non-negative labels (-1: none), how many distinct labels it holds (e.g. the racks
    a partition's replicas span). A label counts in the first column that holds it: a comparison
    with each earlier column, which for the few columns of a replica row costs far less than
    sorting each row."""
    counts: np.ndarray = np.zeros(len(values), dtype=np.int64)
    for j in range(values.shape[1]):
        first = values[:, j] >= 0
        for i in range(j):
            first &= values[:, i] != values[:, j]
        counts += first
    return counts
