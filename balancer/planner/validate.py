"""Independent plan checker: replays a plan on the snapshot and lists every rule it breaks.

Used by the tests and by the benchmark (which fails loudly on any problem); shares no code
with the search so a search bug cannot hide itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .result import Plan


def check_plan(snapshot: Mapping[str, Any], result: Plan) -> list[str]:  # noqa: C901 - one `if` per rule a plan must keep
    problems: list[str] = []
    racks = {b["id"]: b.get("rack") for b in snapshot["brokers"]}
    rack_aware = any(r is not None for r in racks.values())
    drained = set(getattr(result, "drain_brokers", ()))
    # Racks a partition can span: those with a broker that is not drained.
    n_racks = len({r if r is not None else f"__{b}" for b, r in racks.items() if b not in drained}) or 1
    parts = {(p["topic"], p["partition"]): p for p in snapshot["partitions"]}
    seen = set()

    def distinct_racks(reps: Iterable[int]) -> int:
        return len({racks[b] if racks[b] is not None else f"__{b}" for b in reps})

    for a in result.actions:
        key = (a.topic, a.partition)
        where = f"{a.topic}-{a.partition}"
        if key not in parts:
            problems.append(f"{where}: not a partition of the snapshot")
            continue
        if key in seen:
            problems.append(f"{where}: more than one action")
        seen.add(key)
        p = parts[key]
        if list(a.old_replicas) != list(p["replicas"]) or a.old_leader != p["leader"]:
            problems.append(f"{where}: old state {a.old_replicas}/{a.old_leader} is not the snapshot's")
        if len(a.new_replicas) != len(p["replicas"]):
            problems.append(f"{where}: replication factor changed")
        if len(set(a.new_replicas)) != len(a.new_replicas):
            problems.append(f"{where}: duplicate broker in {a.new_replicas}")
        unknown = [b for b in a.new_replicas if b not in racks]
        if unknown:
            problems.append(f"{where}: unknown brokers {unknown}")
            continue
        if rack_aware:
            target = min(len(a.new_replicas), n_racks)
            before, after = distinct_racks(a.old_replicas), distinct_racks(a.new_replicas)
            if after < min(before, target):
                problems.append(f"{where}: rack awareness worsened {before} -> {after} racks")
        if a.new_replicas[0] != a.new_leader:
            problems.append(f"{where}: new_replicas[0] is not the new leader")
    # A drained broker ends with no replica and no leadership, whether its partition moved or not.
    final = {key: list(p["replicas"]) for key, p in parts.items()} if drained else {}
    for a in result.actions if drained else ():
        if (a.topic, a.partition) in final:
            final[(a.topic, a.partition)] = list(a.new_replicas)
    for (topic, partition), reps in final.items():
        left = sorted(drained.intersection(reps))
        if left:
            problems.append(f"{topic}-{partition}: replicas left on drained broker(s) {left}")
    reassign = result.to_reassignment()
    if set(reassign) != {"version", "partitions"} or reassign["version"] != 1:
        problems.append(f"reassignment JSON has keys {sorted(reassign)}")
    for entry in reassign["partitions"]:
        if set(entry) != {"topic", "partition", "replicas", "log_dirs"}:
            problems.append(f"reassignment entry has keys {sorted(entry)}")
        elif (
            len(entry["log_dirs"]) != len(entry["replicas"])
            or (entry["topic"], entry["partition"]) not in parts
        ):
            problems.append(f"reassignment entry {entry} is malformed")
        elif list(entry["replicas"]) == list(parts[(entry["topic"], entry["partition"])]["replicas"]):
            problems.append(f"reassignment lists unchanged partition {entry['topic']}-{entry['partition']}")
    election = result.to_election()
    if set(election) != {"partitions"} or any(
        set(e) != {"topic", "partition"} for e in election["partitions"]
    ):
        problems.append("election JSON is malformed")
    return problems
