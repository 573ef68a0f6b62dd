"""``foreachBatch`` sinks: land telemetry, and turn finalized windows into loads, rankings and plans.

Every write is an idempotent append keyed by (app id, batch id). The app id comes from the
streaming query's own id in its checkpoint, so a replayed batch is skipped, while a query
started on a fresh checkpoint (batch ids from 0 again) is a new writer and is not.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from balancer.config import Config, duration_seconds
from balancer.spark import loads, planning
from balancer.spark.lakehouse import Lakehouse, spark_schema
from balancer.spark.parse import quarantined_records, valid_records
from balancer.spark.quality import Contract

log = logging.getLogger(__name__)


class _QuerySink:
    """A sink's writer id: ``prefix`` + the query id Spark keeps in the checkpoint (written before batch 0)."""

    prefix = ""

    def __init__(self, lakehouse: Lakehouse, config: Config, checkpoint: str | Path):
        self.lakehouse = lakehouse
        self.config = config
        self.checkpoint = Path(checkpoint)
        self.contract = Contract(lakehouse, config.quality)

    @cached_property
    def app_id(self) -> str:
        query_id = json.loads((self.checkpoint / "metadata").read_text().splitlines()[0])["id"]
        return f"{self.prefix}-{query_id}"


class IngestSink(_QuerySink):
    """Parsed Kafka records → ``telemetry_raw`` (valid) and ``telemetry_quarantine`` (with reasons).

    Records older than the stream's watermark (max event time seen before this batch minus
    ``windows.watermark``) are kept and flagged ``is_late``; the window query ignores them.
    """

    prefix = "ingest"

    def __init__(self, lakehouse: Lakehouse, config: Config, checkpoint: str | Path):
        super().__init__(lakehouse, config, checkpoint)
        self.delay_ms = int(duration_seconds(config.windows.watermark) * 1000)
        self._max_event_ms: int | None = None

    def _watermark_ms(self) -> int | None:
        if self._max_event_ms is None:
            # After a restart, resume from what was landed: the latest event time in telemetry_raw.
            latest = self.lakehouse.column_max("telemetry_raw", "ts")
            self._max_event_ms = int(latest.replace(tzinfo=timezone.utc).timestamp() * 1000) if latest else 0
        return self._max_event_ms - self.delay_ms if self._max_event_ms else None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        batch = batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            now = F.lit(datetime.now(timezone.utc)).cast("timestamp")
            watermark = self._watermark_ms()
            late = (F.unix_millis("ts") < F.lit(watermark)) if watermark is not None else F.lit(False)
            valid = valid_records(batch).select(
                "*", late.alias("is_late"), F.lit(batch_id).cast("long").alias("batch_id"), now.alias("ingested_at"))
            bad = quarantined_records(batch).select(
                "*", F.lit(batch_id).cast("long").alias("batch_id"), now.alias("quarantined_at"))
            self.lakehouse.append("telemetry_raw", valid.select(*spark_schema("telemetry_raw").names),
                                  app_id=self.app_id, batch_id=batch_id)
            self.lakehouse.append("telemetry_quarantine", bad.select(*spark_schema("telemetry_quarantine").names),
                                  app_id=self.app_id, batch_id=batch_id)
            self.contract.check_ingest(batch, valid, app_id=self.app_id, batch_id=batch_id)
            latest = batch.where(F.col("quarantine_reason").isNull()).agg(F.max("ts")).first()[0]
            if latest is not None:
                latest_ms = int(latest.replace(tzinfo=timezone.utc).timestamp() * 1000)
                self._max_event_ms = max(self._max_event_ms or 0, latest_ms)
        finally:
            batch.unpersist()


PlanListener = Callable[[list[dict]], None]


class BalanceSink(_QuerySink):
    """Finalized replica windows → partition_load, broker_load, broker_ranking, balance_plans, plan_actions."""

    prefix = "balance"

    def __init__(self, lakehouse: Lakehouse, config: Config, checkpoint: str | Path,
                 on_plans: PlanListener | None = None):
        super().__init__(lakehouse, config, checkpoint)
        self.on_plans = on_plans

    def __call__(self, replica_windows: DataFrame, batch_id: int) -> None:
        windows = replica_windows.persist(StorageLevel.MEMORY_AND_DISK)
        cached = [windows]
        try:
            if windows.isEmpty():
                return
            partitions = loads.partition_load(windows).persist(StorageLevel.MEMORY_AND_DISK)
            brokers = loads.broker_load(partitions, windows).persist(StorageLevel.MEMORY_AND_DISK)
            cached += [partitions, brokers]
            write = self._writer(batch_id)
            write("partition_load", partitions)
            write("broker_load", brokers)
            write("broker_ranking", loads.broker_ranking(brokers, self.config.balancer))
            blocked = self.contract.check_windows(windows, partitions, app_id=self.app_id, batch_id=batch_id)
            # Planning runs once: both tables below and the listener read the cached result.
            plan_rows = planning.plans(partitions, brokers, self.config.balancer,
                                       blocked=blocked).persist(StorageLevel.MEMORY_AND_DISK)
            cached.append(plan_rows)
            new_plans = write("balance_plans", plan_rows)
            write("plan_actions", planning.plan_actions(plan_rows))
            # A replayed batch wrote nothing: its plans were handed out before the crash.
            if self.on_plans is not None and new_plans:
                self.on_plans([row.asDict(recursive=True) for row in plan_rows.orderBy("window_end").collect()])
        finally:
            for frame in reversed(cached):
                frame.unpersist()

    def _writer(self, batch_id: int):
        def write(table: str, frame: DataFrame) -> bool:
            return self.lakehouse.append(table, frame.select(*spark_schema(table).names), app_id=self.app_id,
                                         batch_id=batch_id)
        return write
