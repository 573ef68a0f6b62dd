"""SparkSession construction, and detection of the JVM connectors the cluster path needs."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from balancer.jvm import short_lived_driver_options, spark_jars, spark_sets

if TYPE_CHECKING:
    from balancer.config import Config


def build_session(
    *,
    master: str | None = None,
    app_name: str = "kafka-traffic-balancer",
    conf: dict[str, str] | None = None,
    short_lived: bool = False,
) -> SparkSession:
    """Get or create the session. ``master`` None leaves it to spark-submit. ``short_lived`` (the demos,
    `balancer sql`) starts the driver JVM with balancer.jvm's short-lived options unless the caller set
    ``SPARK_SUBMIT_OPTS`` itself; the streaming job keeps the JVM's defaults."""
    if short_lived:
        os.environ.setdefault("SPARK_SUBMIT_OPTS", short_lived_driver_options())
    # Python workers must run this interpreter (the venv), or they fail to import our package.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    settings = {
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # A clean stop lets the last micro-batch finish instead of interrupting a write.
        "spark.sql.streaming.stopActiveRunOnRestart": "true",
        # A Python worker importing our package on a busy host can take longer than the 15 s default
        # to connect back; that is slowness, not a failure.
        "spark.python.authenticate.socketTimeout": "120s",
        # Each micro-batch is cached for its few writes and checks, then dropped: compressing the
        # cache costs more CPU than the memory it saves is worth for a cache this short-lived.
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        # Spark keeps the classes it compiles for a query's generated code in a cache of 100 by default.
        # Each micro-batch runs the same few hundred queries (landing, windows, contract, plans, tracking),
        # so a cache of 100 evicts them before they come round again and every batch compiles them anew
        # with Janino, on the driver's CPU. A compiled class is a few kilobytes of bytecode.
        "spark.sql.codegen.cache.maxEntries": "2000",
    }
    settings.update(conf or {})
    # delta-spark rebuilds a table's state from its log in this many tasks (Delta's default: 50). The job's
    # tables keep short logs (checkpoints, scheduled compaction) and are read and written every
    # micro-batch, so fifty tiny tasks per table read cost far more than the reading: as many as the
    # shuffles use. Harmless where Delta's jar is not loaded.
    settings.setdefault(
        "spark.databricks.delta.snapshotPartitions", settings.get("spark.sql.shuffle.partitions", "8")
    )
    if delta_jar_requested(settings):
        settings.setdefault("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        settings.setdefault(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def connector_conf(config: Config, conf: dict[str, str] | None = None) -> dict[str, str]:
    """``conf`` plus ``spark.jars`` for the connectors ``config`` needs (balancer.jvm), for a session this
    process starts itself (`balancer run`, `balancer sql`). Under spark-submit the JVM is already up with
    spark-submit.sh's --jars, so nothing is added there."""
    settings = dict(conf or {})
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return settings
    jars = spark_jars(spark_sets(config))
    if jars:
        settings["spark.jars"] = ",".join(filter(None, [settings.get("spark.jars", ""), *jars]))
    return settings


def delta_jar_requested(settings: dict[str, str]) -> bool:
    jars = settings.get("spark.jars", "") + os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    return "delta-spark" in jars


def jvm_class_available(spark: SparkSession, class_name: str) -> bool:
    """True when ``class_name`` is on the driver's classpath (e.g. a connector loaded by --jars)."""
    try:
        jvm = spark.sparkContext._jvm  # classic (non-Connect) sessions only
        jvm.java.lang.Class.forName(class_name, False, jvm.Thread.currentThread().getContextClassLoader())
        return True
    except Exception:
        return False


KAFKA_SOURCE_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
DELTA_CLASS = "io.delta.tables.DeltaTable"


def kafka_jar_available(spark: SparkSession) -> bool:
    return jvm_class_available(spark, KAFKA_SOURCE_CLASS)


def delta_jar_available(spark: SparkSession) -> bool:
    return jvm_class_available(spark, DELTA_CLASS)
