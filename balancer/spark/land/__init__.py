"""Land: what each micro-batch appends as it arrives (telemetry to ``telemetry_raw`` or quarantine, and the
topology and consumer groups polled beside it). Rule: a row lands once, idempotently per (app id, batch id),
and nothing here waits for a window to close."""
