"""The job's one ``foreachBatch`` sink: land telemetry, then finalize the windows its watermark closed.

Each micro-batch, in order:

1. valid records → ``telemetry_raw`` (records older than the watermark flagged ``is_late``),
   bad ones → ``telemetry_quarantine``, the ingest data contract → ``quality_runs``;
2. the event-time watermark advances to (max event time landed) − ``windows.watermark``;
3. every window whose end the watermark passed in this batch is computed from the landed,
   on-time telemetry, and turned into partition_load, broker_load, broker_ranking,
   balance_plans and plan_actions.

Kafka is read and every record parsed once: the windows are aggregated from what step 1 landed
(columnar Delta files), not from a second streaming query with its own state store.

Every write is an idempotent append keyed by (app id, batch id). The app id comes from the
streaming query's own id in its checkpoint, so a replayed batch is skipped, while a query
started on a fresh checkpoint (batch ids from 0 again) is a new writer and is not. A replayed
batch closes the same windows: the watermark before it is read back from the checkpoint
(``balancer.spark.land.telemetry.WatermarkLog``), and its data (fixed offsets) is the same.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

from pyspark import StorageLevel, inheritable_thread_target
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from balancer.capacity import read_capacities
from balancer.config import Config
from balancer.spark.contract.quality import TELEMETRY_SUITES, Contract, merge_ingest_summaries
from balancer.spark.lakehouse import ROUTE_COLUMN, Compactor, Lakehouse, spark_schema
from balancer.spark.land.consumers import ConsumerLog
from balancer.spark.land.telemetry import LandingRoute, WatermarkLog
from balancer.spark.land.topology import TopologyLog, TopologySlice
from balancer.spark.plan import planning
from balancer.spark.track import tracking
from balancer.spark.windows import cc_loads, loads
from balancer.vocabulary import TelemetryFormat

log = logging.getLogger(__name__)

PlanListener = Callable[[list[dict]], None]


def _epoch_ms(stamp: datetime) -> int:
    return int(stamp.replace(tzinfo=stamp.tzinfo or UTC).timestamp() * 1000)


class BalancerSink:
    """Lands each micro-batch of parsed telemetry, then loads, ranks and plans the windows it closed."""

    def __init__(
        self,
        lakehouse: Lakehouse,
        config: Config,
        checkpoint: str | Path,
        on_plans: PlanListener | None = None,
        *,
        app_id: str | None = None,
    ):
        self.lakehouse = lakehouse
        self.config = config
        self.checkpoint = Path(checkpoint)
        self.contract = Contract(
            lakehouse, config.quality, telemetry_suite=TELEMETRY_SUITES[config.source.format]
        )
        self.topology = TopologyLog(lakehouse, config)
        self.consumers = ConsumerLog(lakehouse, config)  # consumers.enabled; see its module for why here
        self.capacities = read_capacities(config.capacity.path) if config.capacity.path else None
        self.on_plans = on_plans
        self.delay_ms = config.windows.watermark.ms
        self.size_ms = config.windows.size.ms
        # A job reading one Cruise Control cluster's topic shares the lakehouse with the jobs of other
        # clusters: it reads back only its own cluster's telemetry. A v1 topic names its clusters in its
        # records.
        self.own_cluster = (
            config.source.cluster if config.source.format == TelemetryFormat.CRUISE_CONTROL else None
        )
        self.watermarks = WatermarkLog(self.checkpoint / "watermarks", self._landed_max_event_ms)
        # The topology rows a window close needs, read since the last close (not the whole history).
        self.partition_topology = TopologySlice(
            lakehouse, "cluster_metadata", ("topic", "partition"), self.own_cluster
        )
        self.broker_topology = TopologySlice(lakehouse, "broker_metadata", ("broker",), self.own_cluster)
        self.compactor = Compactor(lakehouse, config.lakehouse.compaction.interval.seconds)
        # Wall seconds per step, summed over the batches (each batch's own are logged at INFO).
        self.seconds: Counter[str] = Counter()
        # Wall seconds per step of the latest batch (or of the latest ``land`` / ``close_windows`` call).
        self.batch_seconds: Counter[str] = Counter()
        if app_id is not None:  # else read from the streaming checkpoint, which Spark writes before batch 0
            if not isinstance(app_id, str) or not app_id:
                raise ValueError(f"app_id must be a non-empty string, got {app_id!r}")
            self.__dict__["app_id"] = app_id

    @contextmanager
    def timed(self, step: str):
        """Every step of a batch runs inside this; it adds the step's wall seconds to ``batch_seconds``. A
        subclass may wrap it to measure more (the benchmarks add CPU seconds)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.batch_seconds[step] += time.perf_counter() - started

    @cached_property
    def app_id(self) -> str:
        """``balancer-`` + the query id Spark keeps in the checkpoint (written before batch 0)."""
        query_id = json.loads((self.checkpoint / "metadata").read_text().splitlines()[0])["id"]
        return f"balancer-{query_id}"

    def _landed_max_event_ms(self) -> int | None:
        # A fresh checkpoint on an existing lakehouse: windows the landed telemetry already closed stay
        # closed.
        if self.own_cluster is None:
            latest = self.lakehouse.column_max("telemetry_raw", "ts")
        else:  # other clusters' jobs share the lakehouse: only this cluster's telemetry says what closed
            latest = (
                self.lakehouse.read("telemetry_raw")
                .where(F.col("cluster") == self.own_cluster)
                .agg(F.max("ts"))
                .first()[0]
            )
        return _epoch_ms(latest) if latest else None

    def _watermark(self, max_event_ms: int | None) -> int | None:
        return None if max_event_ms is None else max_event_ms - self.delay_ms

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        self.batch_seconds = Counter()
        max_before = self.watermarks.before(batch_id)
        with self.timed("topology"):
            self.topology.refresh(app_id=self.app_id, batch_id=batch_id)
        with self.timed("consumer groups"):
            self.consumers.refresh(app_id=self.app_id, batch_id=batch_id)
        max_after = self.land(batch, batch_id, self._watermark(max_before))
        if max_after is not None and max_before is not None:
            max_after = max(max_after, max_before)
        max_after = max_after if max_after is not None else max_before
        closed_after, closed_until = self._watermark(max_before), self._watermark(max_after)
        if closed_until is not None and closed_until != closed_after:
            self.close_windows(batch_id, closed_after, closed_until)
        self.watermarks.record(batch_id, max_after)
        with self.timed("compaction"):
            self.compactor.maybe_run()
        self.seconds.update(self.batch_seconds)
        log.info(
            "batch %d took %s",
            batch_id,
            ", ".join(f"{step} {sec:.1f}s" for step, sec in self.batch_seconds.items()),
        )

    # -- 1. landing ----------------------------------------------------------------------------

    def land(self, batch: DataFrame, batch_id: int, watermark_ms: int | None) -> int | None:
        """Step 1 of a batch, callable alone: write raw + quarantine + the ingest contract; returns the
        batch's latest valid event time (ms).

        The batch is parsed and cached once, then landed by ``Lakehouse.append_routed`` (on delta-rs one
        pass over the cache: each Python task writes its ``LandingRoute.RAW`` rows to telemetry_raw's folder
        and its ``QUARANTINE`` ones to telemetry_quarantine's, and reduces the contract's per-record probes
        (``Contract.ingest_probes``) beside them; the driver commits both tables).
        """
        now = F.lit(datetime.now(UTC)).cast("timestamp")
        late = (F.unix_millis("ts") < F.lit(watermark_ms)) if watermark_ms is not None else F.lit(False)
        bad = F.col("quarantine_reason").isNotNull()
        # Cached, not written straight from Kafka: that task would chain the source's Python worker,
        # the JVM and the writer's Python worker, which stall on each other.
        # A quarantined value stays bytes as it arrived; value_text is a copy for reading (invalid UTF-8
        # replaced, cut at max_value_bytes). The reason is made valid UTF-8 whatever a parser quoted: a
        # string that lands must be valid UTF-8 (the Delta file statistics are JSON).
        value_text = F.when(
            bad, F.make_valid_utf8(F.substring("value", 1, self.config.source.max_value_bytes).cast("string"))
        )
        probes, probe_columns = self.contract.ingest_probes(batch.columns)
        route = F.when(bad, F.lit(int(LandingRoute.QUARANTINE))).otherwise(F.lit(int(LandingRoute.RAW)))
        landed = batch.select(
            *batch.columns,
            late.alias("is_late"),
            F.lit(batch_id).cast("long").alias("batch_id"),
            now.alias("ingested_at"),
            now.alias("quarantined_at"),
            value_text.alias("value_text"),
            F.make_valid_utf8("quarantine_reason").alias("reason"),
            route.cast("byte").alias(ROUTE_COLUMN),
            *probe_columns,
        ).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            with self.timed("read, parse, land"):
                appended = self.lakehouse.append_routed(
                    landed, LandingRoute, app_id=self.app_id, batch_id=batch_id, summarize=probes
                )
            per_cluster = merge_ingest_summaries(appended.summary)
            with self.timed("ingest contract"):
                # Reads the cache again only for samples of failed records expectations.
                self.contract.check_ingest(
                    landed, landed.where(~bad), app_id=self.app_id, batch_id=batch_id, per_cluster=per_cluster
                )
        finally:
            landed.unpersist()
        latest = [c.valid_last_ts_ms for c in per_cluster if c.valid_last_ts_ms is not None]
        return max(latest) if latest else None

    # -- 2. windows the watermark closed ---------------------------------------------------------

    def close_windows(self, batch_id: int, closed_after_ms: int | None, closed_until_ms: int) -> None:
        """Step 3 of a batch, callable alone: windows ending in (closed_after, closed_until], from the on-time
        telemetry landed so far.

        The planner works a whole cluster-window in one Python task, on one core: it runs in the
        background (after the contract, whose verdict it needs) while the load tables are written.
        """
        lo = None if closed_after_ms is None else closed_after_ms - self.size_ms
        raw = self.lakehouse.read_range("telemetry_raw", "ts", lo, closed_until_ms)
        if self.own_cluster is not None:
            raw = raw.where(F.col("cluster") == self.own_cluster)
        windows = self._replica_windows(raw.where(~F.col("is_late")), closed_after_ms, closed_until_ms)
        windows = windows.persist(StorageLevel.MEMORY_AND_DISK)
        cached = [windows]
        try:
            with self.timed("windows (read back, aggregate)"):
                if windows.isEmpty():
                    return
            partitions = loads.partition_load(windows).persist(StorageLevel.MEMORY_AND_DISK)
            brokers = loads.broker_load(partitions, windows).persist(StorageLevel.MEMORY_AND_DISK)
            cached += [partitions, brokers]
            with self.timed("windows contract"):
                # Its own writer id: the ingest check of this batch already appended to quality_runs.
                blocked = self.contract.check_windows(
                    windows, partitions, app_id=f"{self.app_id}-windows", batch_id=batch_id
                )
            with self.timed("plan lifecycle"):
                # One plan at a time: windows an open plan holds are not planned
                # (balancer.execution.lifecycle).
                gated = tracking.gate(self.lakehouse, self.config, partitions, brokers, closed_after_ms)
            # Planning runs once: both tables below and the listener read the cached result.
            plan_rows = planning.plans(
                partitions,
                brokers,
                self.config.balancer,
                blocked=blocked,
                waiting=gated.frame(brokers.sparkSession),
            ).persist(StorageLevel.MEMORY_AND_DISK)
            cached.append(plan_rows)
            done = self.lakehouse.committed_version("plan_actions", self.app_id)
            replayed = (
                done is not None and done >= batch_id
            )  # its plans landed before the crash: don't plan again
            with ThreadPoolExecutor(max_workers=1) as background:  # waits for the planner, even on an error
                # The session's local properties and tags go with the job, as on this thread.
                planned = background.submit(
                    inheritable_thread_target(plan_rows.sparkSession)(
                        (lambda: None) if replayed else plan_rows.count
                    )
                )
                with self.timed("partition_load"):
                    self._write("partition_load", partitions, batch_id)
                with self.timed("broker_load, broker_ranking"):
                    self._write("broker_load", brokers, batch_id)
                    self._write(
                        "broker_ranking", loads.broker_ranking(brokers, self.config.balancer), batch_id
                    )
                with self.timed("plans"):
                    planned.result()
                    plan_rows, settled = self._settle(
                        plan_rows, gated, partitions, replayed, closed_after_ms, closed_until_ms
                    )
                    new_plans = self._write("balance_plans", plan_rows, batch_id)
                    self._write("plan_actions", planning.plan_actions(plan_rows), batch_id)
            with self.timed("plan lifecycle"):
                self._track(settled, partitions, brokers, batch_id, closed_after_ms, closed_until_ms)
            with self.timed("consumer groups"):
                self.consumers.close_windows(partitions, app_id=self.app_id, batch_id=batch_id)
            # A replayed batch wrote nothing: its plans were handed out before the crash.
            if self.on_plans is not None and new_plans:
                self.on_plans(
                    [row.asDict(recursive=True) for row in plan_rows.orderBy("window_end").collect()]
                )
        finally:
            for frame in reversed(cached):
                frame.unpersist()

    def _settle(
        self,
        plan_rows: DataFrame,
        gated: tracking.Gate,
        partitions: DataFrame,
        replayed: bool,
        closed_after_ms: int | None,
        closed_until_ms: int,
    ) -> tuple[DataFrame, tracking.Settled]:
        """The batch's windows in window order: a plan proposed by one makes the cluster's later windows
        of this batch wait (they were planned together, before anyone knew). A replayed batch reads its
        plans back instead of planning again."""
        if replayed:
            infos = tracking.stored_infos(self.lakehouse, closed_after_ms, closed_until_ms)
        else:
            infos = tracking.planned_infos(plan_rows)
        settled = tracking.settle(gated, infos, partitions, self.config)
        if settled.overrides and not replayed:
            waits = plan_rows.sparkSession.createDataFrame(settled.overrides, "plan_id string, reason string")
            plan_rows = planning.as_waiting(plan_rows, waits)
        return plan_rows, settled

    def _execute(self, plan_ids: list[str]) -> None:
        """executor.mode auto: each new plan's executor, started once its plan_batches are committed."""
        from balancer.execution.auto import launch

        recorded = self.lakehouse.select("plan_executions", ["plan_id"], [("plan_id", "in", plan_ids)])
        started = set(recorded.column("plan_id").to_pylist())
        for plan_id in plan_ids:
            process = launch(
                self.config, plan_id, self.checkpoint / "executor", started_before=plan_id in started
            )
            if process is not None:
                log.info("plan %s: balancer execute started (pid %d)", plan_id, process.pid)

    def _track(
        self,
        settled: tracking.Settled,
        partitions: DataFrame,
        brokers: DataFrame,
        batch_id: int,
        closed_after_ms: int | None,
        closed_until_ms: int,
    ) -> None:
        """plan_events (status and progress changes), plan_batches (the new plans' batches and throttles),
        plan_outcomes (completed plans, predicted vs realized). Few rows: written by the driver."""
        events = tracking.event_rows(settled.tracks)
        if events:
            self.lakehouse.append(
                "plan_events", tracking.arrow("plan_events", events), app_id=self.app_id, batch_id=batch_id
            )
        broker_rows, traffic = tracking.context_rows(partitions, brokers, settled.proposed)
        batches = [
            row
            for info in settled.proposed
            for row in tracking.batch_rows(
                info, broker_rows.get(info.plan_id, []), traffic.get(info.plan_id, {}), self.config
            )
        ]
        if batches:
            self.lakehouse.append(
                "plan_batches", tracking.arrow("plan_batches", batches), app_id=self.app_id, batch_id=batch_id
            )
        if self.config.executor.mode == "auto" and settled.proposed:
            self._execute([info.plan_id for info in settled.proposed])

        def closing(window_ms: int) -> bool:
            return (closed_after_ms is None or window_ms > closed_after_ms) and window_ms <= closed_until_ms

        def window_of(cached: DataFrame, table: str) -> Callable[[int], DataFrame]:
            return lambda ms: (
                cached if closing(ms) else self.lakehouse.read_range(table, "window_end", ms, ms + 1)
            )

        outcomes = [
            row
            for track in settled.tracks
            for outcome in track.outcomes
            for row in tracking.outcome_rows(
                outcome,
                settled.infos[outcome.plan_id],
                window_of(brokers, "broker_load"),
                window_of(partitions, "partition_load"),
            )
        ]
        if outcomes:
            self.lakehouse.append(
                "plan_outcomes",
                tracking.arrow("plan_outcomes", outcomes),
                app_id=self.app_id,
                batch_id=batch_id,
            )

    def _replica_windows(
        self, on_time: DataFrame, closed_after_ms: int | None, closed_until_ms: int
    ) -> DataFrame:
        """One row per report of the closed windows, as ``loads.replica_windows`` gives them, for either
        format."""
        if self.config.source.format == TelemetryFormat.CRUISE_CONTROL:
            spark = on_time.sparkSession
            metadata, brokers = self.partition_topology.frame(spark), self.broker_topology.frame(spark)
            # Later closes end after this one: what they need of the topology is kept (TopologySlice).
            self.partition_topology.closed(closed_until_ms)
            self.broker_topology.closed(closed_until_ms)
            return cc_loads.replica_windows(
                on_time,
                metadata,
                brokers,
                self.capacities,
                self.config.windows,
                ends_after_ms=closed_after_ms,
                ends_until_ms=closed_until_ms,
            )
        windows = loads.replica_windows(
            on_time.where(F.col("v") == TelemetryFormat.V1.raw_version),
            self.config.windows,
            ends_after_ms=closed_after_ms,
            ends_until_ms=closed_until_ms,
        )
        return windows if self.capacities is None else cc_loads.fill_capacities(windows, self.capacities)

    def _write(self, table: str, frame: DataFrame, batch_id: int) -> bool:
        return self.lakehouse.append(
            table, frame.select(*spark_schema(table).names), app_id=self.app_id, batch_id=batch_id
        )
