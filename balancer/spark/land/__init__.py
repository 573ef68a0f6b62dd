"""Land: what each micro-batch appends as it arrives (telemetry to ``telemetry_raw`` or quarantine, and the
topology and consumer groups polled beside it). Rule: a row lands once, idempotently per (app id, batch id),
and nothing here waits for a window to close."""

import time


class Interval:
    """A poll due every ``seconds`` of the driver's monotonic clock, counted from the start of the last
    poll that succeeded: ``due`` (which notes the time) before polling, ``done`` after a poll succeeded. A
    failed poll calls no ``done``, so the next batch retries it."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._done_at: float | None = None
        self._due_at = 0.0

    def due(self, *, force: bool = False) -> bool:
        self._due_at = time.monotonic()
        return force or self._done_at is None or self._due_at - self._done_at >= self.seconds

    def done(self) -> None:
        self._done_at = self._due_at
