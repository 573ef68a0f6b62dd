"""Event-time windows and Cruise Control's load model, as Spark transformations.

All of it runs inside ``foreachBatch`` on windows the watermark has closed, over the telemetry
already landed in Delta (see ``balancer.spark.pipeline``): no streaming state store.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from balancer.config import BalancerConfig, WindowsConfig
from balancer.planner.options import PlannerOptions
from balancer.vocabulary import RESOURCES

WINDOW_KEYS = ("cluster", "window_start", "window_end")
PARTITION_KEYS = (*WINDOW_KEYS, "topic", "partition")


def replica_windows(
    valid: DataFrame, windows: WindowsConfig, *, ends_after_ms: int | None, ends_until_ms: int
) -> DataFrame:
    """Per window ending in (ends_after, ends_until] (epoch ms), one row per (broker, partition replica)
    report and per broker report. Windows are aligned to the epoch, as Spark's ``window`` is.

    Shuffled once, by ``PARTITION_KEYS``, and grouped by them first: the rows come out partitioned
    and sorted the way ``partition_load`` groups and the data contract joins them, so neither
    shuffles or sorts again (the sort is needed here anyway: ``replicas`` and ``rack`` have no
    fixed-width aggregation buffer, so this is a sort aggregation).
    """
    ends = F.unix_millis(F.col("window_end"))
    closed = ends <= F.lit(ends_until_ms)
    if ends_after_ms is not None:
        closed &= ends > F.lit(ends_after_ms)
    # One max_by for all the latest report's fields: they come from the same row either way, and one
    # ordering per row is cheaper than seven.
    latest = F.struct(
        "size", "leader", "replicas", "rack", "capacity_network_in", "capacity_network_out", "capacity_disk"
    )
    return (
        valid.select("*", F.window("ts", windows.size.spark, windows.slide.spark).alias("w"))
        .select("*", F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"))
        .where(closed)
        .repartition(*PARTITION_KEYS)
        .groupBy(*PARTITION_KEYS, "type", "broker")
        .agg(
            F.avg("bytes_in").alias("bytes_in"),
            F.avg("bytes_out").alias("bytes_out"),
            F.avg("messages_in").alias("messages_in"),
            F.max_by(latest, "ts").alias("_latest"),
            F.avg("cpu").alias("cpu"),
            F.max("ts").alias("last_ts"),
            F.count(F.lit(1)).alias("samples"),
        )
        .select(
            *WINDOW_KEYS,
            "type",
            "broker",
            "topic",
            "partition",
            "bytes_in",
            "bytes_out",
            "messages_in",
            "_latest.size",
            "_latest.leader",
            "_latest.replicas",
            "_latest.rack",
            "_latest.capacity_network_in",
            "_latest.capacity_network_out",
            "_latest.capacity_disk",
            "cpu",
            "last_ts",
            "samples",
        )
    )


def partition_load(replicas: DataFrame) -> DataFrame:
    """Per partition: rates from the leader's latest report, topology from the latest report of any
    replica."""
    reports = replicas.where(F.col("type") == "partition")
    # Orders reports so the leader's latest wins; a partition whose leader went silent falls back
    # to a follower's figures (followers replicate the same bytes in).
    leader_first = F.struct(F.col("leader").cast("int"), F.col("last_ts"))
    # The leader's figures by one max_by, as in replica_windows (one ordering, not one per field).
    lead = F.struct(
        F.when(F.col("leader"), F.col("broker")).alias("leader"),
        "bytes_in",
        F.when(F.col("leader"), F.col("bytes_out")).otherwise(F.lit(0.0)).alias("bytes_out"),
        "messages_in",
        "size",
    )
    return (
        reports.groupBy(*PARTITION_KEYS)
        .agg(
            F.max_by(lead, leader_first).alias("_lead"),
            F.max_by("replicas", "last_ts").alias("replicas"),
            F.sum("samples").alias("samples"),
            F.count(F.lit(1)).cast("int").alias("reporting_replicas"),
        )
        .select(
            *PARTITION_KEYS,
            F.coalesce("_lead.leader", F.col("replicas")[0]).alias("leader"),
            "replicas",
            "_lead.bytes_in",
            "_lead.bytes_out",
            "_lead.messages_in",
            "_lead.size",
            "samples",
            "reporting_replicas",
            F.size("replicas").alias("replication_factor"),
        )
    )


def hosted_load(partitions: DataFrame) -> DataFrame:
    """Per (window, broker) hosting a replica: network_in, network_out, disk, replicas, leaders (the
    model below, without capacity). Also gives a plan's predicted loads: partitions with its targets."""
    hosted = partitions.select(
        *WINDOW_KEYS,
        "leader",
        "bytes_in",
        "bytes_out",
        "size",
        "replication_factor",
        F.explode("replicas").alias("broker"),
    )
    is_leader = F.col("broker") == F.col("leader")
    return hosted.groupBy(*WINDOW_KEYS, "broker").agg(
        F.sum("bytes_in").alias("network_in"),
        F.sum(
            F.when(
                is_leader, F.col("bytes_out") + F.col("bytes_in") * (F.col("replication_factor") - 1)
            ).otherwise(0.0)
        ).alias("network_out"),
        F.sum("size").alias("disk"),
        F.count(F.lit(1)).cast("int").alias("replicas"),
        F.sum(is_leader.cast("int")).cast("int").alias("leaders"),
    )


def broker_load(partitions: DataFrame, replicas: DataFrame) -> DataFrame:
    """Cruise Control's model per broker, joined with each broker's capacity report.

    network_in  = Σ bytes_in over replicas on the broker
    network_out = Σ over partitions it leads of bytes_out + bytes_in × (RF − 1)
    disk        = Σ size over replicas on the broker
    A broker that reports capacity but hosts nothing (a new, empty broker) gets zero load.
    """
    loads = hosted_load(partitions)
    capacity = replicas.where(F.col("type") == "broker").select(
        *WINDOW_KEYS,
        "broker",
        "rack",
        "capacity_network_in",
        "capacity_network_out",
        "capacity_disk",
        "cpu",
        "samples",
    )
    joined = loads.join(capacity, [*WINDOW_KEYS, "broker"], "full_outer")
    zero = F.lit(0.0)
    joined = joined.select(
        *WINDOW_KEYS,
        "broker",
        "rack",
        F.coalesce("network_in", zero).alias("network_in"),
        F.coalesce("network_out", zero).alias("network_out"),
        F.coalesce("disk", zero).alias("disk"),
        F.coalesce("replicas", F.lit(0)).alias("replicas"),
        F.coalesce("leaders", F.lit(0)).alias("leaders"),
        "capacity_network_in",
        "capacity_network_out",
        "capacity_disk",
        "cpu",
        F.coalesce("samples", F.lit(0)).cast("long").alias("samples"),
    )
    for resource in RESOURCES:
        joined = joined.withColumn(f"util_{resource}", F.col(resource) / F.col(f"capacity_{resource}"))
    return joined


def broker_ranking(brokers: DataFrame, balancer: BalancerConfig) -> DataFrame:
    """Rank by traffic (bytes in + out) beside rank by partition count; hot = outside the balance band.

    A broker is hot when its network utilization exceeds the resource's balance threshold × the
    cluster's (Σ load / Σ capacity), or ``capacity_threshold`` outright.
    """
    per_window = Window.partitionBy(*WINDOW_KEYS)
    traffic = F.col("network_in") + F.col("network_out")
    ranked = brokers.select(
        *WINDOW_KEYS,
        "broker",
        "network_in",
        "network_out",
        traffic.alias("traffic"),
        "replicas",
        "leaders",
        F.greatest("util_network_in", "util_network_out").alias("utilization"),
        (F.sum("network_in").over(per_window) / F.sum("capacity_network_in").over(per_window)).alias(
            "_avg_in"
        ),
        (F.sum("network_out").over(per_window) / F.sum("capacity_network_out").over(per_window)).alias(
            "_avg_out"
        ),
        "util_network_in",
        "util_network_out",
    )
    # The planner's thresholds, resource by resource, so that a HOT broker always puts its window
    # outside a goal's threshold (balancer.execution.verdict): never ``balanced`` beside a HOT broker.
    # A resource below its low_utilization is not balanced, so it makes no broker hot.
    options = PlannerOptions.from_config(balancer)

    def above(resource: str, avg: str):
        judged = F.col(f"util_{resource}") > F.col(avg) * options.threshold(resource)
        low = options.low_utilization_of(resource)
        return judged & (F.col(avg) >= low) if low > 0 else judged

    hot = (
        above("network_in", "_avg_in")
        | above("network_out", "_avg_out")
        | (F.col("utilization") > options.capacity_threshold)
    )
    return ranked.select(
        *WINDOW_KEYS,
        "broker",
        "network_in",
        "network_out",
        "traffic",
        "replicas",
        "leaders",
        "utilization",
        F.row_number().over(per_window.orderBy(F.desc("traffic"), "broker")).alias("rank_by_traffic"),
        F.row_number().over(per_window.orderBy(F.desc("replicas"), "broker")).alias("rank_by_partitions"),
        F.coalesce(hot, F.lit(False)).alias("is_hot"),
    )
