"""Cruise Control's reports of a closed window as per-report rows, with loads as Cruise Control computes them.

Cruise Control's records carry no replica lists or leaders, so a closed window is joined with the
topology in force at its end (``cluster_metadata``) and turned into the same per-report rows that
``balancer.spark.windows.loads.replica_windows`` gives for v1 telemetry; from there on partition_load,
broker_load, the ranking, the data contract and the plans are the same code for both formats.
Per partition p of topic T led by broker B (Cruise Control's ``SamplingUtils.buildPartitionMetricSample``):

- bytes in / out and messages in = B's TOPIC_BYTES_IN / TOPIC_BYTES_OUT / TOPIC_MESSAGES_IN_PER_SEC for T,
  averaged over the window, split evenly over the partitions of T that B leads; a topic metric B did not
  send counts as 0 (Kafka creates a topic's meters on its first byte). A silent B is not read as zero
  traffic: it sends no broker metrics either, and the windows contract fails the window;
- size = the PARTITION_SIZE B reports for p (the latest in the window); each replica's own report counts
  as that replica reporting (the contract's unreported replicas) and stands in for a silent leader's;
- a broker row per broker of the topology, with its rack, its capacity from Cruise Control's capacity
  file, its mean BROKER_CPU_UTIL and, as ``samples``, the number of distinct report times of its broker
  metrics (0 for a silent broker: the contract's "no capacity report").

Metric topic names have '.' replaced by '_' (Kafka's metric scopes): the topology's names are mapped the
same way to match them, as Cruise Control does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from balancer import telemetry as tm
from balancer.config import WindowsConfig
from balancer.spark.windows.loads import WINDOW_KEYS
from balancer.vocabulary import RESOURCES, TelemetryFormat

if TYPE_CHECKING:
    from balancer.capacity import Capacities


def metric_topic(topic: Column) -> Column:
    """A topic's name as Kafka's metrics spell it ('.' → '_')."""
    return F.translate(topic, ".", "_")


def topology_at(metadata: DataFrame, windows: DataFrame) -> DataFrame:
    """Per window and partition: the replicas and leader in force at the window's end.

    ``metadata``: cluster_metadata rows (one per observed change); ``windows``: (cluster, window_start,
    window_end). The latest observation at or before the window's end wins; where the topology was
    first observed after the window ended (telemetry older than the job's first look at the cluster),
    the earliest observation stands in. A deleted partition (empty replica list) is left out.
    """
    observed = F.unix_millis("observed_at")
    end = F.unix_millis("window_end")
    # Observations before the end rank above every later one; among later ones the earliest ranks highest.
    rank = F.when(observed <= end, observed + F.lit(1 << 50)).otherwise(-observed)
    latest = F.struct("replicas", "leader")
    return (
        metadata.join(windows, "cluster")
        .groupBy(*WINDOW_KEYS, "topic", "partition")
        .agg(F.max_by(latest, rank).alias("_t"))
        .select(*WINDOW_KEYS, "topic", "partition", "_t.replicas", "_t.leader")
        .where(F.size("replicas") > 0)
    )


def brokers_at(brokers: DataFrame, windows: DataFrame) -> DataFrame:
    """Per window: every broker of the topology in force at its end, with its rack (as ``topology_at``)."""
    observed = F.unix_millis("observed_at")
    end = F.unix_millis("window_end")
    rank = F.when(observed <= end, observed + F.lit(1 << 50)).otherwise(-observed)
    return (
        brokers.join(windows, "cluster")
        .groupBy(*WINDOW_KEYS, "broker")
        .agg(F.max_by(F.struct("rack", "present"), rank).alias("_b"))
        .where(F.col("_b.present"))
        .select(*WINDOW_KEYS, "broker", F.col("_b.rack").alias("rack"))
    )


def capacity_frame(spark: SparkSession, capacities: Capacities | None, brokers: DataFrame) -> DataFrame:
    """``brokers`` with capacity_network_in / _out / _disk from the capacity file (the default entry for
    an unlisted broker; NULL without a file, which the planner reports as a missing capacity)."""
    listed = (
        []
        if capacities is None
        else [
            (int(b), float(c.network_in), float(c.network_out), float(c.disk))
            for b, c in capacities.brokers.items()
        ]
    )
    schema = "broker int, cap_in double, cap_out double, cap_disk double"
    table = spark.createDataFrame(listed, schema)
    default = None if capacities is None else capacities.default
    fallback = [
        F.lit(None if default is None else float(getattr(default, name))).cast("double") for name in RESOURCES
    ]
    return (
        brokers.join(F.broadcast(table), "broker", "left")
        .select(
            "*",
            F.coalesce("cap_in", fallback[0]).alias("capacity_network_in"),
            F.coalesce("cap_out", fallback[1]).alias("capacity_network_out"),
            F.coalesce("cap_disk", fallback[2]).alias("capacity_disk"),
        )
        .drop("cap_in", "cap_out", "cap_disk")
    )


def replica_windows(
    raw: DataFrame,
    metadata: DataFrame,
    brokers: DataFrame,
    capacities: Capacities | None,
    windows: WindowsConfig,
    *,
    ends_after_ms: int | None,
    ends_until_ms: int,
) -> DataFrame:
    """``loads.replica_windows`` for Cruise Control records (``raw``: telemetry_raw rows with v 0).

    ``metadata`` / ``brokers``: cluster_metadata / broker_metadata rows. See the module docstring for
    the model."""
    ends = F.unix_millis(F.col("window_end"))
    closed = ends <= F.lit(ends_until_ms)
    if ends_after_ms is not None:
        closed &= ends > F.lit(ends_after_ms)
    reports = (
        raw.where(F.col("v") == TelemetryFormat.CRUISE_CONTROL.raw_version)
        .select(
            "cluster",
            "broker",
            "type",
            "topic",
            "partition",
            "metric",
            "metric_value",
            "ts",
            F.window("ts", windows.size.spark, windows.slide.spark).alias("w"),
        )
        .select("*", F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"))
        .where(closed)
        .drop("w")
    )
    keys = reports.select(*WINDOW_KEYS).distinct()

    def rate(name: str) -> Column:
        return F.avg(F.when(F.col("metric") == name, F.col("metric_value")))

    topic_rates = (
        reports.where(F.col("type") == "topic")
        .groupBy(*WINDOW_KEYS, F.col("broker").alias("leader"), F.col("topic").alias("_mtopic"))
        .agg(
            rate("TOPIC_BYTES_IN").alias("_bi"),
            rate("TOPIC_BYTES_OUT").alias("_bo"),
            rate("TOPIC_MESSAGES_IN_PER_SEC").alias("_mi"),
        )
    )
    sizes = (
        reports.where((F.col("type") == "partition") & (F.col("metric") == "PARTITION_SIZE"))
        .groupBy(*WINDOW_KEYS, "broker", F.col("topic").alias("_mtopic"), "partition")
        .agg(
            F.max_by("metric_value", "ts").alias("size"),
            F.max("ts").alias("last_ts"),
            F.count(F.lit(1)).alias("samples"),
        )
    )
    topology = topology_at(metadata, keys).withColumn("_mtopic", metric_topic(F.col("topic")))
    led = topology.groupBy(*WINDOW_KEYS, "_mtopic", "leader").agg(F.count(F.lit(1)).alias("_led"))
    leader_sizes = sizes.select(
        *WINDOW_KEYS,
        F.col("broker").alias("leader"),
        "_mtopic",
        "partition",
        F.col("size").alias("_leader_size"),
    )
    zero = F.lit(0.0)
    per_partition = (
        topology.join(led, [*WINDOW_KEYS, "_mtopic", "leader"], "left")
        .join(topic_rates, [*WINDOW_KEYS, "leader", "_mtopic"], "left")
        .join(leader_sizes, [*WINDOW_KEYS, "leader", "_mtopic", "partition"], "left")
        .select(
            *WINDOW_KEYS,
            "topic",
            "_mtopic",
            "partition",
            "replicas",
            F.col("leader").alias("_leader"),
            "_leader_size",
            (F.coalesce("_bi", zero) / F.col("_led")).alias("bytes_in"),
            (F.coalesce("_bo", zero) / F.col("_led")).alias("bytes_out"),
            (F.coalesce("_mi", zero) / F.col("_led")).alias("messages_in"),
        )
    )
    null = F.lit(None)
    replica_rows = sizes.join(per_partition, [*WINDOW_KEYS, "_mtopic", "partition"]).select(
        *WINDOW_KEYS,
        F.lit("partition").alias("type"),
        "broker",
        "topic",
        "partition",
        "bytes_in",
        "bytes_out",
        "messages_in",
        F.coalesce("_leader_size", "size").alias("size"),
        (F.col("broker") == F.col("_leader")).alias("leader"),
        "replicas",
        null.cast("string").alias("rack"),
        null.cast("double").alias("capacity_network_in"),
        null.cast("double").alias("capacity_network_out"),
        null.cast("double").alias("capacity_disk"),
        null.cast("double").alias("cpu"),
        "last_ts",
        "samples",
    )
    broker_reports = (
        reports.where(F.col("type") == "broker")
        .groupBy(*WINDOW_KEYS, "broker")
        .agg(
            rate("BROKER_CPU_UTIL").alias("cpu"),
            F.max("ts").alias("last_ts"),
            F.countDistinct("ts").alias("samples"),
        )
    )
    known = brokers_at(brokers, keys)
    broker_rows = (
        capacity_frame(raw.sparkSession, capacities, known)
        .join(broker_reports, [*WINDOW_KEYS, "broker"], "left")
        .select(
            *WINDOW_KEYS,
            F.lit("broker").alias("type"),
            "broker",
            null.cast("string").alias("topic"),
            null.cast("int").alias("partition"),
            null.cast("double").alias("bytes_in"),
            null.cast("double").alias("bytes_out"),
            null.cast("double").alias("messages_in"),
            null.cast("double").alias("size"),
            null.cast("boolean").alias("leader"),
            null.cast("array<int>").alias("replicas"),
            "rack",
            "capacity_network_in",
            "capacity_network_out",
            "capacity_disk",
            "cpu",
            "last_ts",
            F.coalesce("samples", F.lit(0)).cast("long").alias("samples"),
        )
    )
    return replica_rows.unionByName(broker_rows)


def fill_capacities(windows: DataFrame, capacities: Capacities) -> DataFrame:
    """v1 report rows with the capacity file's figures where a broker's own record gave none
    (a broker record's capacity wins for that broker)."""
    filled = capacity_frame(
        windows.sparkSession,
        capacities,
        windows.select(F.col("broker").alias("_b")).distinct().withColumnRenamed("_b", "broker"),
    )
    filled = filled.select("broker", *(F.col(f"capacity_{r}").alias(f"_file_{r}") for r in tm.CAPACITY_KEYS))
    joined = windows.join(F.broadcast(filled), "broker", "left")
    is_broker = F.col("type") == "broker"
    return joined.select(
        *(
            F.when(is_broker, F.coalesce(F.col(c), F.col(f"_file_{c[len('capacity_') :]}")))
            .otherwise(F.col(c))
            .alias(c)
            if c.startswith("capacity_")
            else c
            for c in windows.columns
        )
    )
