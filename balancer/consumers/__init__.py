"""Consumer-side balance, pure: what each consumer group's members must consume, their lag, the group's
churn, and advice naming the cause of a skew. No Spark, no I/O except ``admin`` (the Admin API read)."""
