"""The Spark session the job and the tests build (balancer.spark.session)."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

pytestmark = pytest.mark.integration

QUERIES = 60  # two compiled classes each: more than Spark's default cache of them holds (100)


def test_queries_run_again_reuse_their_compiled_code(spark):
    """Each micro-batch runs the queries the one before it ran: the second round compiles none of them again.
    With Spark's default cache of 100 compiled classes a round of more than 100 evicts its own first ones."""
    compiled = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    rounds = []
    for _ in range(2):
        before = compiled.getCount()
        for i in range(QUERIES):  # the literal is compiled into the code: a distinct class per query
            spark.range(1).select((F.col("id") + F.lit(i)).alias("x")).collect()
        rounds.append(compiled.getCount() - before)
    assert rounds[0] >= QUERIES, rounds
    assert rounds[1] == 0, rounds
