"""The monitored cluster's topology, read every ``metadata.interval`` and kept as history.

Cruise Control's records carry no replica lists, leaders or racks. The sink reads them from a snapshot file
or the cluster's Admin API (``balancer.metadata``) at the start of a micro-batch, and appends what changed
since the last read to ``cluster_metadata`` (partitions) and ``broker_metadata`` (brokers), so a window is
planned with the topology in force at its end, and history answers "where was partition X at 03:10?".
The first read after a start compares with the latest state those tables hold, so a restart appends
nothing when nothing changed.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pandas as pd
import pyarrow as pa
import pyarrow.compute

from balancer.config import Config
from balancer.metadata import ClusterMetadata, PartitionInfo, changed_rows, poll_metadata, read_metadata_file
from balancer.spark.lakehouse import Lakehouse, arrow_schema
from balancer.spark.land import Interval

log = logging.getLogger(__name__)


class TopologyLog:
    """Reads the topology when it is due and appends its changes; ``app_id``/``batch_id`` make each append
    idempotent like every other write of the sink."""

    def __init__(self, lakehouse: Lakehouse, config: Config):
        self.lakehouse = lakehouse
        self.metadata = config.metadata
        self.cluster = config.source.cluster
        self.bootstrap = config.metadata.bootstrap_servers or config.source.bootstrap_servers
        self.interval = Interval(config.metadata.interval.seconds)
        self.previous: ClusterMetadata | None = None

    @property
    def enabled(self) -> bool:
        return self.metadata.source != "none"

    def read(self) -> ClusterMetadata:
        if self.metadata.source == "file":
            return read_metadata_file(self.metadata.path, cluster=self.cluster)
        return poll_metadata(self.bootstrap, self.metadata.options, self.cluster)

    def refresh(self, *, app_id: str, batch_id: int, force: bool = False) -> int:
        """Read the topology if ``metadata.interval`` has passed (or ``force``); returns the rows appended."""
        if not self.enabled:
            return 0
        if not self.interval.due(force=force):
            return 0
        try:
            current = self.read()
        except Exception as exc:  # keep the last topology: windows still close with the one in force
            if self.previous is None and self._stored() is None:
                raise
            log.warning("metadata of %s not read (%s); keeping the last one", self.cluster, exc)
            return 0
        self.interval.done()
        if self.previous is None:
            self.previous = self._stored()
        observed_at = datetime.now(UTC)
        partitions = changed_rows(self.previous, current, observed_at)
        brokers = _broker_changes(self.previous, current, observed_at)
        self.lakehouse.append_rows("cluster_metadata", partitions, app_id=app_id, batch_id=batch_id)
        self.lakehouse.append_rows("broker_metadata", brokers, app_id=app_id, batch_id=batch_id)
        if self.previous is not None:
            _say_membership(self.cluster or self.bootstrap, self.previous, current)
        self.previous = current
        if partitions or brokers:
            log.info(
                "topology of %s: %d partition and %d broker changes",
                self.cluster,
                len(partitions),
                len(brokers),
            )
        return len(partitions) + len(brokers)

    def _stored(self) -> ClusterMetadata | None:
        """The latest state ``cluster_metadata`` and ``broker_metadata`` hold for this cluster, or None."""
        from pyspark.sql import functions as F

        def latest(table: str, keys: list[str]):
            frame = self.lakehouse.read(table).where(F.col("cluster") == self.cluster)
            return (
                frame.groupBy(*keys)
                .agg(
                    F.max_by(F.struct(*[c for c in frame.columns if c not in keys]), "observed_at").alias(
                        "_l"
                    )
                )
                .select(*keys, "_l.*")
                .toPandas()
            )

        parts = latest("cluster_metadata", ["topic", "partition"])
        brokers = latest("broker_metadata", ["broker"])
        if parts.empty and brokers.empty:
            return None
        return ClusterMetadata(
            cluster=self.cluster,
            brokers={
                int(b): r for b, r, p in zip(brokers["broker"], brokers["rack"], brokers["present"]) if p
            },
            partitions=tuple(
                PartitionInfo(
                    topic=t,
                    partition=int(p),
                    replicas=tuple(int(x) for x in r),
                    leader=None if lead is None or lead != lead else int(lead),
                    isr=tuple(int(x) for x in (i if i is not None else ())),
                )
                for t, p, r, lead, i in zip(
                    parts["topic"], parts["partition"], parts["replicas"], parts["leader"], parts["isr"]
                )
                if r is not None and len(r) > 0
            ),
        )


def _say_membership(cluster: str, before: ClusterMetadata, after: ClusterMetadata) -> None:
    """A broker that left the cluster is the operator's business at once (a WARNING reaches the console);
    the job reads on from the partitions' new leaders."""
    left = sorted(set(before.brokers) - set(after.brokers))
    back = sorted(set(after.brokers) - set(before.brokers))
    live = ", ".join(map(str, sorted(after.brokers)))
    if left:
        log.warning("broker(s) %s left Kafka cluster %s (live: %s)", ", ".join(map(str, left)), cluster, live)
    if back:
        log.warning(
            "broker(s) %s joined Kafka cluster %s (live: %s)", ", ".join(map(str, back)), cluster, live
        )


def _broker_changes(previous: ClusterMetadata | None, current: ClusterMetadata, observed_at) -> list[dict]:
    before = {} if previous is None else dict(previous.brokers)
    rows = [
        {
            "cluster": current.cluster,
            "observed_at": observed_at,
            "broker": int(b),
            "rack": rack,
            "present": True,
        }
        for b, rack in current.brokers.items()
        if b not in before or before[b] != rack
    ]
    rows += [
        {
            "cluster": current.cluster,
            "observed_at": observed_at,
            "broker": int(b),
            "rack": rack,
            "present": False,
        }
        for b, rack in before.items()
        if b not in current.brokers
    ]
    return rows


class TopologySlice:
    """The rows of ``cluster_metadata`` or ``broker_metadata`` (one cluster) that the topology of every
    window not yet closed depends on, kept between window closes so that each close reads only the rows
    committed since the last one (``observed_at`` after the newest row already held; the files whose
    Delta statistics rule that out are not read), never the whole history.

    ``cc_loads.topology_at`` (``brokers_at``) takes, per key and window, the latest row observed at
    or before the window's end, else the earliest after it. For windows ending after ``W`` that choice is
    the same among: every row observed after ``W``, plus per key the latest row observed at or before
    ``W``. Windows close in order, so after each close the held rows are pruned to that with ``W`` = the
    end of the last closed window: what is held stays one row per key plus the changes since.

    One writer appends a cluster's rows (its job's ``TopologyLog``), with the wall clock of the reading
    at each append: a later append has a later ``observed_at``. The first use reads the cluster's whole
    history once (a restart included).
    """

    def __init__(self, lakehouse: Lakehouse, table: str, keys: tuple[str, ...], cluster: str | None):
        self.lakehouse = lakehouse
        self.table = table
        self.keys = keys
        self.cluster = cluster
        self.held: pa.Table | None = None
        self.rows_read = 0  # rows read from the table by the last ``rows`` call

    def rows(self) -> pa.Table:
        """The held rows with those committed since the last call."""
        from balancer.spark.lakehouse import Filter

        filters: list[Filter] = [] if self.cluster is None else [("cluster", "=", self.cluster)]
        columns = arrow_schema(self.table).names
        if self.held is not None and self.held.num_rows:
            newest = pa.compute.max(self.held.column("observed_at")).as_py()
            filters.append(("observed_at", ">", newest))
        fresh = self.lakehouse.select(self.table, columns, filters)
        self.rows_read = fresh.num_rows
        self.held = (
            fresh if self.held is None else pa.concat_tables([self.held, fresh.cast(self.held.schema)])
        )
        return self.held

    def frame(self, spark):
        """``rows()`` as a Spark DataFrame in the table's schema."""
        from balancer.spark.lakehouse import spark_schema

        return spark.createDataFrame(self.rows().to_pylist(), spark_schema(self.table))

    def closed(self, until_ms: int) -> None:
        """Windows ending at or before ``until_ms`` are closed: keep per key only the latest row observed at
        or before it, and every row after it."""
        if self.held is None or not self.held.num_rows:
            return
        frame = self.held.to_pandas()
        observed = frame["observed_at"].map(lambda t: int(t.timestamp() * 1000))
        old = (
            frame[observed <= until_ms]
            .sort_values("observed_at")
            .drop_duplicates(list(self.keys), keep="last")
        )
        kept = pa.Table.from_pandas(
            pd.concat([old, frame[observed > until_ms]]), schema=self.held.schema, preserve_index=False
        )
        self.held = kept
