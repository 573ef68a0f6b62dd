"""Which version of a Delta table was current at a time: one rule for `balancer history`, `balancer sql
--as-of TIME` and ``Lakehouse.read(as_of=...)``, on both engines.

A commit's time is the one its writer recorded (``commitInfo.timestamp``), the time `balancer history` prints.
Delta's own time travel (delta-rs ``load_as_version(datetime)``, Spark's ``timestampAsOf``) goes by the log
file's modification time instead, which comes later, by as much as the writer was slow to finish: reading
"as of" a printed commit time could then miss that very commit.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping


def version_at(path: str, at: dt.datetime, storage_options: Mapping[str, str] | None = None) -> int | None:
    """The newest version of the table at ``path`` committed at or before ``at``; None when its first commit
    is later (the table did not exist yet)."""
    from deltalake import DeltaTable

    at_ms = at.timestamp() * 1000
    history = DeltaTable(path, storage_options=dict(storage_options or {})).history()
    versions = [int(entry["version"]) for entry in history if entry["timestamp"] <= at_ms]
    return max(versions) if versions else None
