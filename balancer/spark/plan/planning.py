"""Plan every (cluster, window) inside Spark: ``cogroup(...).applyInPandas`` with the pure planner.

Planning runs on executors, one group per cluster and finalized window, so a fleet of
clusters scales with executors. The function below is stateless and picklable.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from balancer.config import BalancerConfig
from balancer.spark.lakehouse import spark_schema
from balancer.spark.windows.loads import WINDOW_KEYS
from balancer.vocabulary import PlanStatus

ACTION_TYPE = T.StructType(
    [
        T.StructField("seq", T.IntegerType()),
        T.StructField("action", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("old_replicas", T.ArrayType(T.IntegerType())),
        T.StructField("new_replicas", T.ArrayType(T.IntegerType())),
        T.StructField("old_leader", T.IntegerType()),
        T.StructField("new_leader", T.IntegerType()),
        T.StructField("bytes_to_move", T.LongType()),
    ]
)
PLAN_RESULT_SCHEMA = T.StructType(
    list(spark_schema("balance_plans").fields) + [T.StructField("actions", T.ArrayType(ACTION_TYPE))]
)
_NAMESPACE = uuid.UUID("5d0b0f4e-6a59-4f3c-9a59-0d7d8f1a7c11")
# The columns balancer.snapshot reads: only these go through the cogroup's shuffle and Arrow.
PARTITION_INPUT = ("topic", "partition", "leader", "replicas", "bytes_in", "bytes_out", "size")
BROKER_INPUT = ("broker", "rack", "capacity_network_in", "capacity_network_out", "capacity_disk")


def plan_id(cluster: str, window_end: datetime) -> str:
    """Deterministic, so a replayed micro-batch produces the same plan id."""
    return str(uuid.uuid5(_NAMESPACE, f"{cluster}|{window_end.isoformat()}"))


def _base_row(cluster: str, window_start, window_end) -> dict:
    row = {name: None for name in PLAN_RESULT_SCHEMA.names}
    row.update(
        plan_id=plan_id(cluster, pd.Timestamp(window_end).to_pydatetime()),
        cluster=cluster,
        created_at=datetime.now(UTC),
        window_start=window_start,
        window_end=window_end,
        actions=[],
    )
    return row


def _verdict_columns(unmet: tuple, advice: list) -> dict:
    """The unmet_*, binding_* and advice* columns: the first goal outside its threshold in the planner's
    priority order (``unmet[0]``) and what binds it, every unmet goal's name, and the advice (its first,
    most fundamental kind)."""
    columns: dict = {"unmet_goals": [u.goal for u in unmet]}
    if unmet:
        worst = unmet[0]
        columns.update(
            unmet_goal=worst.goal,
            unmet_figure=float(worst.figure),
            unmet_threshold=float(worst.threshold),
            unmet_lower_bound=float(worst.lower_bound),
            binding=worst.binding,
            binding_topic=worst.binding_topic,
            binding_partition=worst.binding_partition,
            binding_brokers=list(worst.binding_brokers),
        )
    grow = next((a for a in advice if a.kind == "add_partitions"), None)
    columns.update(
        advice=advice[0].kind if advice else None,
        advice_topic=grow.topic if grow else None,
        partitions_to_add=grow.partitions_to_add if grow else None,
        brokers_to_add=max((a.brokers_to_add or 0 for a in advice if a.kind == "add_brokers"), default=None),
        advice_detail="\n".join(a.message for a in advice) or None,
    )
    return columns


def _fill_row(row: dict, snapshot, result, options) -> dict:
    """``row`` completed with a planner result (imbalance figures, Kafka's JSON files, actions) and its
    verdict: ``balanced`` only when every goal is within its threshold (balancer.execution.verdict)."""
    from balancer.execution.advice import advise
    from balancer.execution.verdict import judge
    from balancer.planner import ClusterModel

    model = ClusterModel(snapshot, options)
    advice = advise(model, result, options)  # of the placement before the plan: before ``judge`` moves it
    verdict = judge(model, result, options)
    election = result.to_election()
    row.update(
        status=str(verdict.status),
        reason=verdict.unmet[0].binding if verdict.status is PlanStatus.UNBALANCED else None,
        imbalance_before=result.imbalance_before,
        imbalance_after=result.imbalance_after,
        network_in_before=result.before["network_in"],
        network_in_after=result.after["network_in"],
        network_out_before=result.before["network_out"],
        network_out_after=result.after["network_out"],
        disk_before=result.before["disk"],
        disk_after=result.after["disk"],
        bytes_to_move=int(result.bytes_to_move),
        leader_moves=int(result.leader_moves),
        replica_moves=int(result.replica_moves),
        reassignment_json=json.dumps(result.to_reassignment()) if result.actions else None,
        election_json=json.dumps(election) if election["partitions"] else None,
        actions=[a.row(seq) for seq, a in enumerate(result.actions)],
        **_verdict_columns(verdict.unmet, advice),
    )
    return row


def _plan_built(row: dict, built, balancer: BalancerConfig, blocked_reason: str | None) -> dict:
    from balancer.planner import PlannerOptions, plan

    problems = ([blocked_reason] if blocked_reason else []) + list(built.problems)
    if problems:
        row.update(status=str(PlanStatus.SKIPPED), reason="; ".join(problems))
        return row
    options = PlannerOptions.from_config(balancer)
    return _fill_row(row, built.snapshot, plan(built.snapshot, options), options)


def plan_window(
    cluster: str,
    window_start,
    window_end,
    partitions: list[dict],
    brokers: list[dict],
    balancer: BalancerConfig,
    blocked_reason: str | None = None,
) -> dict:
    """One balance_plans row (with its actions) for one cluster and window. Pure but for the clock."""
    from balancer.snapshot import build_snapshot

    row = _base_row(cluster, window_start, window_end)
    return _plan_built(row, build_snapshot(cluster, partitions, brokers), balancer, blocked_reason)


def plan_frames(
    cluster: str,
    window_start,
    window_end,
    partitions: pd.DataFrame,
    brokers: pd.DataFrame,
    balancer: BalancerConfig,
    blocked_reason: str | None = None,
) -> dict:
    """``plan_window`` for pandas frames of partition_load / broker_load rows: the same row, but the
    frames go into the planner's arrays column by column (no dict per partition)."""
    from balancer.snapshot import build_snapshot_frames

    row = _base_row(cluster, window_start, window_end)
    return _plan_built(row, build_snapshot_frames(cluster, partitions, brokers), balancer, blocked_reason)


def _records(frame: pd.DataFrame) -> list[dict]:
    from balancer.snapshot import frame_records

    return frame_records(frame)


def plan_group(
    key, partition_rows: pd.DataFrame, broker_rows: pd.DataFrame, balancer: BalancerConfig
) -> pd.DataFrame:
    """One (cluster, window) group's frames -> one balance_plans row, as a frame."""
    return pd.DataFrame(
        [group_row(key, partition_rows, broker_rows, balancer)], columns=PLAN_RESULT_SCHEMA.names
    )


def group_row(key, partition_rows: pd.DataFrame, broker_rows: pd.DataFrame, balancer: BalancerConfig) -> dict:
    """One (cluster, window) group's frames -> its balance_plans row (with its actions)."""
    cluster, window_start, window_end = key
    reasons = [r for r in broker_rows.get("_blocked", pd.Series(dtype=object)).dropna().unique()]
    waits = [r for r in broker_rows.get("_waiting", pd.Series(dtype=object)).dropna().unique()]
    # Another plan holds the cluster (balancer.execution.lifecycle): not planned at all. A window the data
    # contract failed stays skipped whichever plan holds the cluster: its data cannot be judged at all.
    if waits and not reasons:
        row = _base_row(cluster, window_start, window_end)
        row.update(status=str(PlanStatus.WAITING), reason="; ".join(sorted(waits) + sorted(reasons)))
        return row
    return plan_frames(
        cluster,
        window_start,
        window_end,
        partition_rows,
        broker_rows.drop(columns=["_blocked", "_waiting"], errors="ignore"),
        balancer,
        blocked_reason="; ".join(sorted(reasons)) or None,
    )


def plans(
    partitions: DataFrame,
    brokers: DataFrame,
    balancer: BalancerConfig,
    blocked: DataFrame | None = None,
    waiting: DataFrame | None = None,
) -> DataFrame:
    """balance_plans rows, with an ``actions`` array column, one per (cluster, window).

    ``blocked``: optional (cluster, window_start, window_end, reason) rows from the data
    contract; such windows get a ``skipped`` plan naming the reason. ``waiting``: optional
    (cluster, window_end, reason) rows of windows an open plan holds (one plan at a time); they
    get a ``waiting`` row naming it, and the planner does not run.
    """
    partitions = partitions.select(*WINDOW_KEYS, *PARTITION_INPUT)
    brokers = brokers.select(*WINDOW_KEYS, *BROKER_INPUT)
    if blocked is not None:
        brokers = brokers.join(blocked.withColumnRenamed("reason", "_blocked"), list(WINDOW_KEYS), "left")
    else:
        brokers = brokers.withColumn("_blocked", F.lit(None).cast("string"))
    if waiting is not None:
        brokers = brokers.join(
            F.broadcast(waiting.withColumnRenamed("reason", "_waiting")), ["cluster", "window_end"], "left"
        )

    spark = partitions.sparkSession
    tasks, slots = task_slots(partitions, brokers, spark.sparkContext.defaultParallelism)  # one small job
    if not slots:
        return spark.createDataFrame([], PLAN_RESULT_SCHEMA)
    # As many tasks as cluster windows, up to the cores Spark has: each task a slot value that Spark's
    # hash partitioning sends to a partition of its own, its cluster windows assigned largest first to
    # the least loaded task. Both sides are partitioned by the slot into exactly that many partitions
    # and the cogroup groups by the slot alone, which that partitioning satisfies: Spark adds no shuffle
    # of its own (spark.sql.shuffle.partitions plays no part) and adaptive execution cannot coalesce
    # the tasks (a partition count given to repartition is kept). No more tasks than cores: every task
    # pays for starting its Python worker, about a second on a busy machine.

    def slotted(frame: DataFrame) -> DataFrame:  # a frame of its own per side: no self-join for the cogroup
        keyed = F.broadcast(spark.createDataFrame(slots, _slots_schema()))
        return frame.join(keyed, list(WINDOW_KEYS)).repartition(tasks, SLOT)

    partitions, brokers = slotted(partitions), slotted(brokers)

    def group(key, partition_rows: pd.DataFrame, broker_rows: pd.DataFrame) -> pd.DataFrame:
        # One task's cluster windows, each planned on its own.
        parts = partition_rows.drop(columns=[SLOT]).groupby(list(WINDOW_KEYS), sort=False)
        brokers_of = broker_rows.drop(columns=[SLOT]).groupby(list(WINDOW_KEYS), sort=False)
        keys = sorted(set(parts.groups) | set(brokers_of.groups))
        empty_p = partition_rows.drop(columns=[SLOT]).iloc[0:0]
        empty_b = broker_rows.drop(columns=[SLOT]).iloc[0:0]
        rows = [
            group_row(
                k,
                parts.get_group(k) if k in parts.groups else empty_p,
                brokers_of.get_group(k) if k in brokers_of.groups else empty_b,
                balancer,
            )
            for k in keys
        ]
        return pd.DataFrame(rows, columns=PLAN_RESULT_SCHEMA.names)

    return (
        partitions.groupBy(SLOT)
        .cogroup(brokers.groupBy(SLOT))
        .applyInPandas(group, schema=PLAN_RESULT_SCHEMA)
    )


SLOT = "_slot"


def _slots_schema() -> T.StructType:
    keys = [spark_schema("balance_plans")[k] for k in WINDOW_KEYS]
    return T.StructType([*keys, T.StructField(SLOT, T.LongType(), False)])


def task_slots(partitions: DataFrame, brokers: DataFrame, cores: int) -> tuple[int, list[tuple]]:
    """How many planning tasks (the cluster windows, at most ``cores``), and each cluster window's slot
    as (*WINDOW_KEYS, slot) rows: the windows, largest (most partitions) first, each to the task with
    the fewest partitions so far; task i's slot is the least value Spark's hash partitioning into that
    many partitions sends to partition i."""
    sizes = (
        partitions.groupBy(*WINDOW_KEYS)
        .agg(F.count(F.lit(1)).alias("n"))
        .unionByName(brokers.select(*WINDOW_KEYS, F.lit(0).cast("long").alias("n")))
        .groupBy(*WINDOW_KEYS)
        .agg(F.sum("n").alias("n"))
        .collect()
    )
    if not sizes:
        return 0, []
    tasks = max(1, min(len(sizes), cores))
    slots = partition_slots(tasks)
    load = [0] * tasks
    out = []
    for row in sorted(sizes, key=lambda r: (-r["n"], r["cluster"], r["window_end"])):
        task = min(range(tasks), key=lambda t: (load[t], t))
        load[task] += int(row["n"])
        out.append((row["cluster"], row["window_start"], row["window_end"], slots[task]))
    return tasks, out


def partition_slots(n: int) -> list[int]:
    """For each partition i of n: the least non-negative long that Spark's hash partitioning
    (``pmod(murmur3_hash(value, 42), n)``) sends there."""
    out: list[int | None] = [None] * n
    missing, value = n, 0
    while missing:
        i = _murmur3_long(value) % n
        if out[i] is None:
            out[i] = value
            missing -= 1
        value += 1
    return [int(v) for v in out if v is not None]


def _murmur3_long(value: int, seed: int = 42) -> int:
    """Spark's ``Murmur3_x86_32.hashLong`` (what ``hash(col)`` and hash partitioning compute for a
    LongType column), as a signed 32-bit int."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    def mix_k1(k: int) -> int:
        return (rotl((k * 0xCC9E2D51) & mask, 15) * 0x1B873593) & mask

    def mix_h1(h: int, k: int) -> int:
        return (rotl(h ^ k, 13) * 5 + 0xE6546B64) & mask

    h = mix_h1(seed & mask, mix_k1(value & mask))
    h = mix_h1(h, mix_k1((value >> 32) & mask))
    h ^= 8
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


# What a window that waits keeps of a plan computed for it: its identity, and the window.
_WAITING_KEEPS = ("plan_id", "cluster", "created_at", "window_start", "window_end")


def as_waiting(plan_rows: DataFrame, waiting: DataFrame) -> DataFrame:
    """``plan_rows`` with the plans named in ``waiting`` (plan_id, reason) turned into ``waiting``
    rows: no figures, no actions, as if the planner had not run (a plan of an earlier window
    closed in the same micro-batch holds the cluster). A ``skipped`` row stays skipped (see
    ``plan_group``)."""
    joined = plan_rows.join(F.broadcast(waiting.withColumnRenamed("reason", "_wait")), "plan_id", "left")
    waits = F.col("_wait").isNotNull() & (F.col("status") != str(PlanStatus.SKIPPED))
    columns = []
    for field in PLAN_RESULT_SCHEMA.fields:
        column = F.col(field.name)
        if field.name == "status":
            column = F.when(waits, F.lit(str(PlanStatus.WAITING))).otherwise(column)
        elif field.name == "reason":
            column = F.when(waits, F.col("_wait")).otherwise(column)
        elif field.name == "actions":
            column = F.when(waits, F.filter(column, lambda _: F.lit(False))).otherwise(column)
        elif field.name not in _WAITING_KEEPS:
            column = F.when(waits, F.lit(None).cast(field.dataType)).otherwise(column)
        columns.append(column.alias(field.name))
    return joined.select(*columns)


def plan_actions(plan_rows: DataFrame) -> DataFrame:
    return (
        plan_rows.select("plan_id", "cluster", F.explode("actions").alias("a"))
        .select("plan_id", "cluster", "a.*")
        .select(*spark_schema("plan_actions").names)
    )
