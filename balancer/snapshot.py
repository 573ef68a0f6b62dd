"""Turn one finalized window's loads into the planner's snapshot (pure Python; no Spark).

Also the telemetry completeness check that decides whether a window may be planned at all:
a broker that hosts replicas but sent no capacity report went silent, and silence is not
"zero traffic".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class SnapshotResult:
    snapshot: dict
    problems: tuple[str, ...]  # non-empty: do not plan from this window


def _num(value) -> float:
    return 0.0 if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def build_snapshot(cluster: str, partitions: Iterable[Mapping], brokers: Iterable[Mapping]) -> SnapshotResult:
    """``partitions``: rows of partition_load; ``brokers``: rows of broker_load (one window, one cluster)."""
    problems: list[str] = []
    broker_list = []
    silent = []
    known = set()
    for row in sorted(brokers, key=lambda r: int(r["broker"])):
        broker_id = int(row["broker"])
        capacity = {k: row.get(f"capacity_{k}") for k in ("network_in", "network_out", "disk")}
        if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in capacity.values()):
            silent.append(broker_id)
            continue
        known.add(broker_id)
        entry = {"id": broker_id, "capacity": {k: float(v) for k, v in capacity.items()}}
        if row.get("rack"):
            entry["rack"] = row["rack"]
        broker_list.append(entry)
    if silent:
        problems.append(f"no capacity report from broker(s) {', '.join(map(str, silent))} in this window "
                        f"(broker silent or telemetry lost)")
    partition_list = []
    for row in sorted(partitions, key=lambda r: (r["topic"], int(r["partition"]))):
        replicas = [int(b) for b in row["replicas"]]
        leader = int(row["leader"]) if row.get("leader") is not None else replicas[0]
        if leader not in replicas:  # leadership moved between reports; trust the replica list
            leader = replicas[0]
        partition_list.append({"topic": row["topic"], "partition": int(row["partition"]), "replicas": replicas,
                               "leader": leader, "bytes_in": _num(row.get("bytes_in")),
                               "bytes_out": _num(row.get("bytes_out")), "size": _num(row.get("size"))})
    if not partition_list:
        problems.append("no partition reports in this window")
    if not broker_list:
        problems.append("no broker reported its capacity in this window")
    return SnapshotResult({"cluster": cluster, "brokers": broker_list, "partitions": partition_list},
                          tuple(problems))
