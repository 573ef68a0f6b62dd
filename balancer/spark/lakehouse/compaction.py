"""The job's own compaction of every table's small files, on a schedule, between micro-batches."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from balancer.spark.lakehouse.facade import Lakehouse
from balancer.spark.lakehouse.tables import TABLES

log = logging.getLogger(__name__)


class Compactor:
    """Compacts every table's small files (``Lakehouse.compact``) once ``interval`` seconds have passed
    since the job started or last compacted; 0 never. Run by the sink between micro-batches, so it never
    races the job's own appends; a failure is logged and retried at the next interval, the stream goes on."""

    def __init__(self, lakehouse: Lakehouse, interval: float, clock: Callable[[], float] = time.monotonic):
        self.lakehouse = lakehouse
        self.interval = interval
        self.clock = clock
        self.last = clock()

    def maybe_run(self) -> dict[str, int] | None:
        """Files removed per table, or None when it was not due."""
        if self.interval <= 0 or self.clock() - self.last < self.interval:
            return None
        removed: dict[str, int] = {}
        for table in TABLES:
            try:
                removed[table] = self.lakehouse.compact(table)
            except Exception as exc:  # e.g. a commit conflict with another job: the next interval retries
                log.warning("compaction of %s failed (%s); retried in %.0f s", table, exc, self.interval)
        self.last = self.clock()
        log.info("compaction: %s", ", ".join(f"{t} {n} files" for t, n in removed.items() if n) or "nothing")
        return removed
