"""The streaming job: Kafka → parse → one ``foreachBatch`` sink that lands raw + quarantined
telemetry and turns the event-time windows its watermark closed into loads, ranking and plans.

One query, one checkpoint: Kafka is read and each record parsed once, and windows are
aggregated from the landed Delta files when they close, so there is no streaming state store
to grow with the number of replicas (see ``balancer.spark.pipeline``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from balancer.config import Config
from balancer.spark.ingest.cc_records import parse_cruise_control, with_cruise_control_values
from balancer.spark.ingest.parse import parse_telemetry
from balancer.spark.lakehouse import Lakehouse
from balancer.spark.pipeline import BalancerSink, PlanListener
from balancer.spark.session import kafka_jar_available
from balancer.vocabulary import TelemetryFormat

log = logging.getLogger(__name__)


def python_source_options(config: Config, *, streaming: bool = True) -> dict[str, str]:
    """Options of our Kafka source (``kafka_py``) for the configured topic (the format's decoder is handed
    to the source itself: ``decoders.for_format``)."""
    source = config.source
    options = {
        "kafka.bootstrap.servers": source.bootstrap_servers,
        "subscribe": source.topic,
        "startingOffsets": source.starting_offsets if streaming else "earliest",
        "kafkaUnavailableTimeoutMs": str(source.unavailable_timeout.ms),
        "failOnDataLoss": "true",
    }
    if streaming:
        options["maxOffsetsPerTrigger"] = str(source.max_records_per_batch)
    options.update({f"kafka.{key}": value for key, value in source.options.items()})
    return options


def python_source(spark: SparkSession, config: Config) -> str:
    """Register our Kafka source for the configured format; returns the format name to read it by. Its
    reading tasks decode each value in that format (``decoders.for_format``), beside the raw bytes."""
    from balancer.spark.ingest import decoders
    from balancer.spark.ingest.kafka import KafkaSource

    source = KafkaSource.decoding(decoders.for_format(config.source.format))
    spark.dataSource.register(source)
    return source.name()


def kafka_stream(spark: SparkSession, config: Config) -> DataFrame:
    """The metrics topic as Spark's Kafka columns (key, value, topic, partition, offset, timestamp); our
    source adds the configured format's decoded value (``python_source``)."""
    source = config.source
    if source.connector == "python":
        return (
            spark.readStream.format(python_source(spark, config))
            .options(**python_source_options(config))
            .load()
        )
    if not kafka_jar_available(spark):
        raise RuntimeError(
            "source.connector is 'native' but Spark's Kafka connector jar is not on the "
            "classpath; submit with spark-submit.sh (it passes spark-sql-kafka-0-10 with --jars from "
            "jvm/lib, which make setup resolves) or set source.connector=python"
        )
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", source.bootstrap_servers)
        .option("subscribe", source.topic)
        .option("startingOffsets", source.starting_offsets)
        .option("maxOffsetsPerTrigger", str(source.max_records_per_batch))
        .option("failOnDataLoss", "true")
    )
    for key, value in source.options.items():
        reader = reader.option(f"kafka.{key}", value)
    return reader.load()


def parse_stream(kafka: DataFrame, config: Config) -> DataFrame:
    """The metrics topic's records parsed in the configured format: telemetry columns, a reason where bad."""
    source = config.source
    if source.format == TelemetryFormat.CRUISE_CONTROL:
        if "value_cc" not in kafka.columns:  # Spark's own Kafka source: decode in one Arrow pass
            kafka = with_cruise_control_values(kafka)
        return parse_cruise_control(
            kafka,
            cluster=source.cluster,
            max_value_bytes=source.max_value_bytes,
            max_rate=source.max_rate,
            max_size=source.max_size,
        )
    return parse_telemetry(
        kafka, max_value_bytes=source.max_value_bytes, max_rate=source.max_rate, max_size=source.max_size
    )


ONCE_NO_DATA_PROGRESS = "100ms"


def start(
    spark: SparkSession, config: Config, *, once: bool = False, on_plans: PlanListener | None = None
) -> list[StreamingQuery]:
    """Start the job's streaming query; the caller awaits or stops it (a list, as ``await_all`` takes)."""
    lakehouse = Lakehouse(
        spark,
        config.lakehouse.path,
        engine=config.lakehouse.engine,
        storage_options=config.lakehouse.storage_options,
    )
    lakehouse.create_all(config.lakehouse.retention.table_properties())
    checkpoint = Path(config.checkpoint.path).resolve() / "balancer"
    parsed = parse_stream(kafka_stream(spark, config), config)
    # --once drains with a fast trigger instead of availableNow, so run_until_idle can tell when it is done:
    # by a progress report of an empty trigger. Spark posts the first of those only
    # noDataProgressEventInterval (10 s by default) after the last batch with data; --once asks for it at
    # the next trigger, so a drained topic ends the run at once instead of ten seconds later.
    if once:
        spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", ONCE_NO_DATA_PROGRESS)
    query = (
        parsed.writeStream.queryName("balancer")
        .trigger(processingTime="1 second" if once else config.trigger.interval.text)
        .option("checkpointLocation", str(checkpoint))
        .foreachBatch(BalancerSink(lakehouse, config, checkpoint, on_plans))
        .start()
    )
    log.info("started query %s; lakehouse at %s (%s)", query.name, lakehouse.root, lakehouse.engine)
    return [query]


# Spark gives the Python process behind a Python data source (our Kafka source) a fixed 10 s, which no
# setting changes, to start and connect back to the driver; on a driver short of CPU its start can miss it
# and the query fails before reading anything. Such a query is started again, a bounded number of times.
START_ATTEMPTS = 3
_SOURCE_START_MISSED = "Python worker failed to connect back"


class SourceStartError(RuntimeError):
    """The query's Kafka source missed Spark's start-up deadline on every attempt."""


class Job:
    """The job's query, started, and started again (up to ``START_ATTEMPTS`` times in a row, a warning each
    time) when its Python source missed its start-up deadline (above): it had read nothing, and the
    checkpoint makes a restart exactly once. Attempts count failed starts in a row: a query that made
    progress before it failed had started, so a long run is not ended by failures months apart. Whatever
    watches the query hands a failure to ``recover`` (``run``), or calls ``check`` between its own steps
    (the demos); ``queries`` are the ones running now. ``starter`` starts them (by default the job's
    query, ``start``)."""

    def __init__(
        self,
        spark: SparkSession,
        config: Config,
        *,
        once: bool = False,
        on_plans: PlanListener | None = None,
        starter: Callable[[], list[StreamingQuery]] | None = None,
    ):
        self.spark = spark
        self._start = starter or functools.partial(start, spark, config, once=once, on_plans=on_plans)
        self.attempt = 1
        self.queries = self._start()

    def check(self) -> None:
        """Raise a failed query's error, or start the query again if the failure is a missed start."""
        for query in self.queries:
            error = query.exception()
            if error is not None:
                self.recover(error)
                return

    def recover(self, error: BaseException) -> None:
        """Start the query again after ``error`` if it is a missed start (a Python process that did not
        connect back in time) with attempts left; else raise it."""
        if _SOURCE_START_MISSED not in str(error):
            raise error
        started = any(query.recentProgress for query in self.queries)
        if started:
            self.attempt = 1  # the query had started: this failure begins a new count
        if self.attempt == START_ATTEMPTS:
            raise SourceStartError(
                f"the Kafka source's Python process missed Spark's 10 s start-up deadline on each of "
                f"{START_ATTEMPTS} attempts ({_SOURCE_START_MISSED}): the driver is short of CPU; give "
                "it more cores or run fewer processes beside it"
            ) from error
        self.attempt += 1
        log.warning(
            "%s did not connect back to Spark within its 10 s (the host is short of CPU); starting the "
            "query again (attempt %d of %d), from its checkpoint",
            "a Python worker of the running query" if started else "the Kafka source's Python process",
            self.attempt,
            START_ATTEMPTS,
        )
        for query in self.queries:
            if query.isActive:
                query.stop()
        self.spark.streams.resetTerminated()
        self.queries = self._start()


def run(spark: SparkSession, config: Config, *, once: bool = False) -> None:
    """Start the job's query and wait for it: until the topic is drained (``once``) or for ever; a missed
    start of its Python source starts it again (``Job``)."""
    running = Job(spark, config, once=once)
    while True:
        try:
            (run_until_idle if once else await_all)(spark, running.queries)
            return
        except Exception as error:  # a StreamingQueryException, or the py4j error around it
            running.recover(error)


def _idle(query: StreamingQuery) -> bool:
    status, progress = query.status, query.lastProgress
    return (
        progress is not None
        and progress["numInputRows"] == 0
        and not status["isDataAvailable"]
        and not status["isTriggerActive"]
    )


def run_until_idle(spark: SparkSession, queries: list[StreamingQuery], *, poll_seconds: float = 0.5) -> None:
    """``--once``: let the queries drain the topic and stop once every query is idle. A failed query is
    raised. (Windows close in the batch whose data moves the watermark past them: no extra batch.)"""
    try:
        while True:
            for query in queries:
                if query.exception() is not None:
                    raise query.exception()
                if not query.isActive:
                    raise RuntimeError(f"streaming query {query.name} stopped unexpectedly")
            if all(_idle(query) for query in queries):
                return
            time.sleep(poll_seconds)
    finally:
        for query in queries:
            if query.isActive:
                query.stop()


def stop_when_idle(queries: list[StreamingQuery], *, timeout_seconds: float) -> None:
    """Stop the queries between micro-batches: wait (up to the timeout) until each has drained what
    is available, so ``stop()`` does not interrupt a batch in the middle of its writes (which is
    safe, a restart replays it, but leaves interrupted-task errors in the log)."""
    deadline = time.monotonic() + timeout_seconds
    for query in queries:
        quiet = 0  # consecutive polls without a running batch
        while query.isActive and quiet < 3 and time.monotonic() < deadline:
            quiet = 0 if query.status["isTriggerActive"] else quiet + 1
            time.sleep(0.2)
        query.stop()


def await_all(spark: SparkSession, queries: list[StreamingQuery]) -> None:
    """Wait until every query has ended; the first failure stops the others and is raised."""
    try:
        while any(query.isActive for query in queries):
            spark.streams.awaitAnyTermination()  # raises the failure of a failed query
            spark.streams.resetTerminated()
    finally:
        for query in queries:
            if query.isActive:
                query.stop()
