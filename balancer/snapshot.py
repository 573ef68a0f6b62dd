"""Turn one finalized window's loads into the planner's snapshot (pure Python; no Spark).

Also the telemetry completeness check that decides whether a window may be planned at all:
a broker that hosts replicas but sent no capacity report went silent, and silence is not
"zero traffic".

Two inputs, one result: ``build_snapshot`` takes rows as dicts (a dict snapshot: the CLI's and
tests' format); ``build_snapshot_frames`` takes the pandas frames ``applyInPandas`` hands over and
builds a :class:`~balancer.planner.model.ColumnarSnapshot` with numpy (a million-replica window
without a Python object per partition). Same snapshot content, same problems.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from balancer.planner.model import RESOURCES, ColumnarSnapshot


@dataclass(frozen=True)
class SnapshotResult:
    snapshot: Mapping  # a dict, or a ColumnarSnapshot (a Mapping with the same content)
    problems: tuple[str, ...]  # non-empty: do not plan from this window


def _num(value) -> float:
    return 0.0 if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def frame_records(frame: pd.DataFrame) -> list[dict]:
    """Rows of ``frame`` as dicts, missing values (NaN, NaT, None) as None."""
    frame = frame.astype(object).where(frame.notna(), None)
    return frame.to_dict("records")


def _brokers(brokers: Iterable[Mapping]) -> tuple[list[dict], list[int]]:
    broker_list, silent = [], []
    for row in sorted(brokers, key=lambda r: int(r["broker"])):
        broker_id = int(row["broker"])
        capacity = {k: row.get(f"capacity_{k}") for k in RESOURCES}
        if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in capacity.values()):
            silent.append(broker_id)
            continue
        entry = {"id": broker_id, "capacity": {k: float(v) for k, v in capacity.items()}}
        if row.get("rack"):
            entry["rack"] = row["rack"]
        broker_list.append(entry)
    return broker_list, silent


def _problems(silent: list[int], n_partitions: int, n_brokers: int) -> tuple[str, ...]:
    problems: list[str] = []
    if silent:
        problems.append(
            f"no capacity report from broker(s) {', '.join(map(str, silent))} in this window "
            f"(broker silent or telemetry lost)"
        )
    if not n_partitions:
        problems.append("no partition reports in this window")
    if not n_brokers:
        problems.append("no broker reported its capacity in this window")
    return tuple(problems)


def build_snapshot(cluster: str, partitions: Iterable[Mapping], brokers: Iterable[Mapping]) -> SnapshotResult:
    """``partitions``: rows of partition_load; ``brokers``: rows of broker_load (one window, one cluster)."""
    broker_list, silent = _brokers(brokers)
    partition_list = []
    for row in sorted(partitions, key=lambda r: (r["topic"], int(r["partition"]))):
        replicas = [int(b) for b in row["replicas"]]
        leader = int(row["leader"]) if row.get("leader") is not None else replicas[0]
        if leader not in replicas:  # leadership moved between reports; trust the replica list
            leader = replicas[0]
        partition_list.append(
            {
                "topic": row["topic"],
                "partition": int(row["partition"]),
                "replicas": replicas,
                "leader": leader,
                "bytes_in": _num(row.get("bytes_in")),
                "bytes_out": _num(row.get("bytes_out")),
                "size": _num(row.get("size")),
            }
        )
    return SnapshotResult(
        {"cluster": cluster, "brokers": broker_list, "partitions": partition_list},
        _problems(silent, len(partition_list), len(broker_list)),
    )


def _rates(frame: pd.DataFrame, column: str) -> np.ndarray:
    if column not in frame:
        return np.zeros(len(frame))
    values = pd.to_numeric(frame[column]).to_numpy(dtype=np.float64, na_value=np.nan)
    return np.where(np.isnan(values), 0.0, values)  # _num: missing is 0


def build_snapshot_frames(cluster: str, partitions: pd.DataFrame, brokers: pd.DataFrame) -> SnapshotResult:
    """``build_snapshot`` for partition_load / broker_load frames (as ``applyInPandas`` gives them:
    ``replicas`` an object column of int arrays or lists), vectorized over partitions.

    Same snapshot (``dict(result.snapshot)`` equals ``build_snapshot``'s) and same problems;
    a frame the vectorized path cannot read (a missing topic or partition, an empty or
    non-integer replica list) goes through ``build_snapshot`` row by row instead.
    """
    broker_list, silent = _brokers(frame_records(brokers))
    n = len(partitions)
    pid_col, reps = partitions["partition"], partitions["replicas"].to_numpy(dtype=object)
    codes, uniques = pd.factorize(partitions["topic"], sort=False)  # a missing topic: code -1
    uniques = list(uniques)
    try:
        counts = np.fromiter(map(len, reps), dtype=np.int64, count=n)
        readable = (
            not pid_col.isna().any()
            and not (counts < 1).any()
            and not (codes < 0).any()
            and all(isinstance(t, str) for t in uniques)
        )
        flat = np.concatenate(reps) if n and readable else np.zeros(0, dtype=np.int64)
    except (TypeError, ValueError):  # a replica list that is missing or not a list
        readable = False
    if not readable or flat.dtype.kind not in "iu":
        return build_snapshot(cluster, frame_records(partitions), frame_records(brokers))
    pid = pid_col.to_numpy(dtype=np.int64)
    flat = flat.astype(np.int64)

    # Sorted by (topic, partition) like build_snapshot: rank the few distinct topics in Python.
    by_name = sorted(range(len(uniques)), key=uniques.__getitem__)
    rank = np.empty(len(uniques), dtype=np.int64)
    rank[by_name] = np.arange(len(uniques))
    codes = rank[codes]
    order = np.lexsort((pid, codes))
    starts = np.cumsum(counts) - counts
    counts_o = counts[order]
    starts_o = np.cumsum(counts_o) - counts_o
    flat = flat[np.repeat(starts[order] - starts_o, counts_o) + np.arange(len(flat))]
    first = flat[starts_o] if n else flat

    # Leader: the reported one if among the replicas, else the first replica.
    lead = (
        pd.to_numeric(partitions["leader"]).to_numpy(dtype=np.float64, na_value=np.nan)[order]
        if "leader" in partitions
        else np.full(n, np.nan)
    )
    missing = np.isnan(lead)
    lead = np.where(missing, first, np.where(missing, 0, lead).astype(np.int64))
    among = np.add.reduceat((flat == np.repeat(lead, counts_o)).astype(np.int64), starts_o) > 0 if n else lead
    lead = np.where(among, lead, first)

    snapshot = ColumnarSnapshot(
        cluster=cluster,
        broker_ids=np.array([b["id"] for b in broker_list], dtype=np.int64),
        racks=[b.get("rack") for b in broker_list],
        capacity=np.array(
            [[b["capacity"][r] for r in RESOURCES] for b in broker_list], dtype=np.float64
        ).reshape(len(broker_list), len(RESOURCES)),
        topic_names=[uniques[i] for i in by_name],
        topic_codes=codes[order],
        partition_ids=pid[order],
        replica_counts=counts_o,
        replicas_flat=flat,
        leader=lead,
        bytes_in=_rates(partitions, "bytes_in")[order],
        bytes_out=_rates(partitions, "bytes_out")[order],
        size=_rates(partitions, "size")[order],
    )
    return SnapshotResult(snapshot, _problems(silent, n, len(broker_list)))
