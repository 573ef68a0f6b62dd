"""``balancer agent``: measures every broker of a Kafka cluster each interval and publishes what it measured
to the metrics topic, in Cruise Control's reporter format (default) or v1.

One small module per piece: ``prometheus`` (the exposition text format), ``rates`` (counters to rates:
gaps, resets, bounded memory), ``measurement`` (what one broker's interval holds and the counts of what
could not be used), ``jmx`` (the Prometheus JMX exporter endpoint of each broker), ``admin`` (the Admin API
alone), ``publish`` (records in either format) and ``runner`` (the loop:
:class:`~balancer.agent.runner.Agent`).
"""
