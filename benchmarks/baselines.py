"""Two baselines the planner is compared against, on the same snapshot and load model.

* ``kafka_generate``: ``kafka-reassign-partitions.sh --generate``, i.e. a fresh
  ``AdminUtils.assignReplicasToBrokers`` (rack-aware when brokers have racks) over all brokers;
  the moves are the diff with the current assignment, leaders the new preferred replicas.
* ``count_balance``: a count-based minimal-movement balancer (Wix's "4 steps for Kafka
  rebalance"): even out replica counts per broker with the fewest moves, keeping rack
  awareness, then even out leader counts by preferred-leader reordering. Traffic-blind.

Both return ``(replicas, leaders)``: per partition, in snapshot order, broker ids.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from balancer.demo.scenarios import assign_replicas
from balancer.planner.model import DISK, IN, OUT, ClusterModel


def kafka_generate(snapshot: dict, seed: int = 0) -> tuple[list[list[int]], list[int]]:
    rng = np.random.default_rng(seed)
    ids = [b["id"] for b in snapshot["brokers"]]
    racks = {b["id"]: b["rack"] for b in snapshot["brokers"] if b.get("rack")}
    racks = racks if len(racks) == len(ids) and len(set(racks.values())) > 1 else None
    by_topic: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(snapshot["partitions"]):
        by_topic[p["topic"]].append(i)
    new: list[list[int] | None] = [None] * len(snapshot["partitions"])
    for topic in sorted(by_topic):
        idx = by_topic[topic]
        parts = snapshot["partitions"]
        rf = len(parts[idx[0]]["replicas"])
        n = max(parts[i]["partition"] for i in idx) + 1
        start, shift = (int(x) for x in rng.integers(0, len(ids), size=2))
        table = assign_replicas(n, rf, ids, racks, start, shift).tolist()
        for i in idx:
            new[i] = table[parts[i]["partition"]]
    return new, [r[0] for r in new]  # type: ignore[index]


def count_balance(snapshot: dict) -> tuple[list[list[int]], list[int]]:
    model = ClusterModel(snapshot)
    ids = model.broker_ids.tolist()
    nb = len(ids)
    reps = model.replicas.copy()
    leader = model.leader.copy()
    rack = model.rack
    counts = np.bincount(reps[reps >= 0], minlength=nb)
    total = int(counts.sum())
    # Fewest moves: the brokers holding most keep the rounded-up targets.
    order = np.argsort(-counts, kind="stable")
    target = np.full(nb, total // nb)
    target[order[: total % nb]] += 1
    flat = reps.ravel()
    pidx = np.repeat(np.arange(len(reps)), reps.shape[1])
    ok = flat >= 0
    srt = np.lexsort((pidx[ok], flat[ok]))
    owners, plist = flat[ok][srt], pidx[ok][srt]
    bounds = np.searchsorted(owners, np.arange(nb + 1))
    for src in order.tolist():
        if counts[src] <= target[src]:
            continue
        for p in plist[bounds[src] : bounds[src + 1]].tolist():
            if counts[src] <= target[src]:
                break
            row = reps[p]
            others = row[(row >= 0) & (row != src)]
            other_racks = set(rack[others].tolist())
            for dst in np.nonzero(counts < target)[0].tolist():
                if dst in others:
                    continue
                if model.rack_aware and rack[dst] != rack[src] and rack[dst] in other_racks:
                    continue
                row[row == src] = dst
                if leader[p] == src:
                    leader[p] = dst
                counts[src] -= 1
                counts[dst] += 1
                break
    # Leaders: even out counts by handing leadership to a follower with fewer.
    lcounts = np.bincount(leader, minlength=nb)
    lorder = np.argsort(-lcounts, kind="stable")
    ltarget = np.full(nb, len(leader) // nb)
    ltarget[lorder[: len(leader) % nb]] += 1
    for src in lorder.tolist():
        if lcounts[src] <= ltarget[src]:
            continue
        for p in np.nonzero(leader == src)[0].tolist():
            if lcounts[src] <= ltarget[src]:
                break
            for f in reps[p].tolist():
                if f >= 0 and f != src and lcounts[f] < ltarget[f]:
                    leader[p] = f
                    lcounts[src] -= 1
                    lcounts[f] += 1
                    break
    new = [[ids[b] for b in row if b >= 0] for row in reps.tolist()]
    leaders = [ids[b] for b in leader.tolist()]
    return [[ld] + [b for b in r if b != ld] for r, ld in zip(new, leaders)], leaders


def evaluate(snapshot: dict, replicas: list[list[int]], leaders: list[int]) -> dict:
    """Balance after, data moved and move counts of an assignment; raises if it is invalid."""
    parts = snapshot["partitions"]
    known = {b["id"]: b.get("rack") for b in snapshot["brokers"]}
    moved_bytes = 0
    replica_moves = 0
    leader_moves = 0
    after_parts = []
    for p, new, ld in zip(parts, replicas, leaders):
        old = p["replicas"]
        if (
            len(new) != len(old)
            or len(set(new)) != len(new)
            or any(b not in known for b in new)
            or ld not in new
        ):
            raise AssertionError(
                f"baseline produced an invalid assignment for {p['topic']}-{p['partition']}: {new}"
            )
        added = len(set(new) - set(old))
        moved_bytes += added * p["size"]
        replica_moves += added
        leader_moves += ld != p["leader"] and not added  # same meaning as Plan.leader_moves
        after_parts.append({**p, "replicas": list(new), "leader": ld})
    after = ClusterModel({**snapshot, "partitions": after_parts})
    return {
        "after": {
            "network_in": after.balance(IN),
            "network_out": after.balance(OUT),
            "disk": after.balance(DISK),
        },
        "bytes_to_move": int(moved_bytes),
        "replica_moves": replica_moves,
        "leader_moves": int(leader_moves),
    }
