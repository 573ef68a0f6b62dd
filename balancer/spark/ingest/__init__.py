"""Ingest: the metrics topic's records read into Spark and parsed into telemetry rows, each valid or
carrying the reason it is not. Nothing here writes or aggregates; the Kafka connector (``kafka``) is
generic and is handed the product's value decoders (``decoders``) rather than knowing its formats."""
