-- Why telemetry was quarantined, most frequent first, with one example of each.
CREATE OR REPLACE TEMP VIEW quarantine_reasons AS
SELECT regexp_replace(reason, ': .*$', '') AS reason_kind, count(*) AS records,
       min(quarantined_at) AS first_seen, max(quarantined_at) AS last_seen, first(value_text) AS example
FROM telemetry_quarantine
GROUP BY 1
ORDER BY records DESC
