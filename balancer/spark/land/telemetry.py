"""Telemetry landing's hand-offs: where the landing pass routes each record (``LandingRoute``) and the
latest event time landed after each batch (``WatermarkLog``), which a replayed batch starts from."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from balancer.spark.lakehouse import Route


class LandingRoute(Route):
    """Where the landing pass puts a record: valid ones in telemetry_raw, bad ones in telemetry_quarantine."""

    RAW = 0, "telemetry_raw"
    QUARANTINE = 1, "telemetry_quarantine"


class WatermarkLog:
    """The latest event time landed after each batch, one small JSON file per batch id in the checkpoint.

    ``before(n)`` is what batch ``n`` starts from: the entry of the newest batch below ``n``
    (a replayed batch ignores any entry of its own, written before the crash). Without any entry
    (a fresh checkpoint on an existing lakehouse) it falls back to ``fallback()``.
    """

    KEEP = 100

    def __init__(self, folder: Path, fallback: Callable[[], int | None]):
        self.folder = folder
        self.fallback = fallback

    def _ids(self) -> list[int]:
        if not self.folder.is_dir():
            return []
        return sorted(int(p.name) for p in self.folder.iterdir() if p.name.isdigit())

    def before(self, batch_id: int) -> int | None:
        earlier = [i for i in self._ids() if i < batch_id]
        if not earlier:
            return self.fallback()
        return json.loads((self.folder / str(earlier[-1])).read_text())["max_event_ms"]

    def record(self, batch_id: int, max_event_ms: int | None) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        staged = self.folder / f".{batch_id}.tmp"
        staged.write_text(json.dumps({"max_event_ms": max_event_ms}))
        staged.replace(self.folder / str(batch_id))  # atomic: a crash leaves the old entry or the new one
        for old in self._ids()[: -self.KEEP]:
            (self.folder / str(old)).unlink(missing_ok=True)
