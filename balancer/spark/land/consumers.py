"""Consumer-side balance in the job: read the monitored cluster's consumer groups, and turn each closed
window into consumer_lag, consumer_ranking, consumer_groups and consumer_advice (``balancer.consumers``).

Where it runs: in the job's sink, on the driver, beside the topology read (``TopologyLog``), not in a
separate poller. The figures of a window need that window's partition byte rates, which exist only in the
batch that closes the window (``partition_load``), so the figures are computed there; the reads themselves
are a few Admin API requests a minute, landed through the same idempotent append as every other table of
the batch (a replayed batch writes nothing twice), with nothing else to deploy, schedule or watch. The
cost of that choice: the groups are read when a micro-batch runs, so no more often than telemetry arrives
(every reporter interval, a minute for v1 and Cruise Control); ``consumers.interval`` below that is met
only as often as batches run.

Reads are by wall clock and windows by event time: telemetry is stamped by the brokers when they measure,
so the two agree to within the reporters' clock skew. A window is closed only after the watermark passed
its end, so every read of it has landed by then.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from balancer.config import Config
from balancer.consumers.admin import poll_groups
from balancer.consumers.model import Snapshot
from balancer.consumers.rows import COLUMNS, assignment_rows
from balancer.consumers.windows import RATE_COLUMNS, Settings, window_figures
from balancer.spark.lakehouse import Lakehouse
from balancer.spark.land import Interval

log = logging.getLogger(__name__)

FIGURE_TABLES = {"lag": "consumer_lag", "ranking": "consumer_ranking", "groups": "consumer_groups"}


class ConsumerLog:
    """Reads the consumer groups when ``consumers.interval`` has passed (``refresh``) and computes the
    figures of the windows a batch closes (``close_windows``); both append idempotently per batch."""

    def __init__(self, lakehouse: Lakehouse, config: Config):
        consumers = config.consumers
        self.lakehouse = lakehouse
        self.enabled = consumers.enabled
        self.cluster = consumers.cluster or config.source.cluster or ""
        self.bootstrap = (
            consumers.bootstrap_servers
            or config.metadata.bootstrap_servers
            or config.source.bootstrap_servers
        )
        self.options = dict(consumers.options)
        self.groups = re.compile(consumers.groups) if consumers.groups else None
        self.interval = Interval(consumers.interval.seconds)
        # The newest read before a window is its baseline: look back a window, or two reads if longer.
        self.lookback = timedelta(seconds=max(config.windows.size.seconds, 2 * consumers.interval.seconds))
        self.window_size = timedelta(seconds=config.windows.size.seconds)
        self.settings = Settings(
            balance_threshold=consumers.balance_threshold,
            storm_windows=consumers.storm_windows,
            storm_min_windows=consumers.storm_min_windows,
            min_lag_growth=consumers.min_lag_growth,
        )

    def read(self) -> Snapshot:
        return poll_groups(self.bootstrap, self.options, self.cluster, groups=self.groups)

    def refresh(self, *, app_id: str, batch_id: int, force: bool = False) -> int:
        """Read the groups if due (or ``force``) and land the read; returns the rows appended. A failed
        read is logged and skipped: the windows then have fewer reads, never invented ones."""
        if not self.enabled:
            return 0
        if not self.interval.due(force=force):
            return 0
        try:
            snapshot = self.read()
        except Exception as exc:
            log.warning("consumer groups of %s not read (%s)", self.cluster, exc)
            return 0
        self.interval.done()
        return self.land(snapshot, app_id=app_id, batch_id=batch_id)

    def land(self, snapshot: Snapshot, *, app_id: str, batch_id: int) -> int:
        """Append one read to ``consumer_assignments``; returns the rows appended."""
        return self.lakehouse.append_rows(
            "consumer_assignments", assignment_rows(snapshot), app_id=app_id, batch_id=batch_id
        )

    def close_windows(self, partitions: DataFrame, *, app_id: str, batch_id: int) -> dict[str, int]:
        """The consumer figures of every window of this cluster in ``partitions`` (partition_load rows of
        the windows the batch closes); returns the rows appended per table."""
        if not self.enabled:
            return {}
        own = partitions.where(F.col("cluster") == self.cluster)
        # Epoch milliseconds, not collected timestamps: those come back in the driver's local time zone.
        windows = sorted(
            (_at(row["start_ms"]), _at(row["end_ms"]))
            for row in own.select(
                F.unix_millis("window_start").alias("start_ms"), F.unix_millis("window_end").alias("end_ms")
            )
            .distinct()
            .collect()
        )
        if not windows:
            return {}
        lo, hi = windows[0][0] - self.lookback, windows[-1][1]
        polls = self.lakehouse.select(
            "consumer_assignments",
            COLUMNS,
            [("cluster", "=", self.cluster), ("observed_at", ">=", lo), ("observed_at", "<", hi)],
        ).to_pandas()
        if polls.empty:
            return {}
        topics = sorted(polls["topic"].dropna().unique())
        rates = (
            own.where(F.col("topic").isin(topics))
            .select(F.unix_millis("window_end").alias("end_ms"), *RATE_COLUMNS)
            .toPandas()
            if topics
            else pd.DataFrame(columns=["end_ms", *RATE_COLUMNS])
        )
        history = self.lakehouse.select(
            "consumer_groups",
            ["group_id", "window_end", "membership_changes", "rejoins", "rejoined_client"],
            [
                ("cluster", "=", self.cluster),
                ("window_end", ">=", lo - self.window_size * self.settings.storm_windows),
                ("window_end", "<", hi),
            ],
        ).to_pandas()
        out: dict[str, list[dict]] = {"lag": [], "ranking": [], "groups": [], "advice": []}
        for start, end in windows:
            figures = window_figures(
                polls,
                rates[rates["end_ms"] == int(end.timestamp() * 1000)],
                cluster=self.cluster,
                window_start=start,
                window_end=end,
                history=history,
                settings=self.settings,
            )
            for key in out:
                out[key].extend(getattr(figures, key))
            if figures.groups:  # later windows of the same batch see this one's churn
                history = pd.concat(
                    [history, pd.DataFrame(figures.groups)[history.columns]], ignore_index=True
                )
        written = {
            table: self.lakehouse.append_rows(table, out[key], app_id=app_id, batch_id=batch_id)
            for key, table in {**FIGURE_TABLES, "advice": "consumer_advice"}.items()
        }
        flagged = [g["group_id"] for g in out["groups"] if g["flagged"]]
        if flagged:
            log.info("consumer groups of %s flagged: %s", self.cluster, ", ".join(sorted(set(flagged))))
        return written


def _at(epoch_ms: int) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
