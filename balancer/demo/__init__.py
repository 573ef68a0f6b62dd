"""What the demo and the tests need around the product, and what a cluster deployment does not ship.

- ``run``: the ``make run-sim`` walk-through (``python -m balancer.demo``).
- ``scenarios``: synthetic clusters (shapes, seeds) for the demo, tests and benchmarks.
- ``simulator``: a simulated cluster publishing v1 telemetry, following executed plans.
- ``cc_reporter``: the same cluster publishing as Cruise Control's metrics reporter.
- ``embedded_broker``: the embedded Kafka broker (Tansu).
- ``cluster``: a Spark standalone master and workers on loopback (``make cluster-up``).
- ``report``: the demo's console tables.
"""
