"""The cluster path: Spark's own Kafka source and Delta's Spark connector, selected by config.

Their jars come from Maven (spark-submit.sh passes --packages); where they are not on the
classpath, these tests skip and say so.
"""

from __future__ import annotations

import pytest
from support import minutes_of, produce, simulated

from balancer.config import load_config
from balancer.spark import job
from balancer.spark.lakehouse import Lakehouse
from balancer.spark.session import delta_jar_available, kafka_jar_available

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def test_native_kafka_and_delta_spark_end_to_end(spark, broker, topic, tmp_path):
    if not kafka_jar_available(spark):
        pytest.skip(
            "Spark's Kafka connector (spark-sql-kafka-0-10) is not on the classpath: no Maven repository "
            "is reachable here; spark-submit.sh adds it with --packages on a cluster"
        )
    if not delta_jar_available(spark):
        pytest.skip(
            "Delta's Spark connector (delta-spark) is not on the classpath: no Maven repository is "
            "reachable here; spark-submit.sh adds it with --packages on a cluster"
        )
    cluster = simulated(cluster="native")
    records = produce(broker.bootstrap_servers, topic, minutes_of(cluster, 0, 6))
    config = load_config(
        None,
        [
            f"source.bootstrap_servers={broker.bootstrap_servers}",
            f"source.topic={topic}",
            "source.connector=native",
            "lakehouse.engine=delta-spark",
            f"lakehouse.path={tmp_path / 'lh'}",
            f"checkpoint.path={tmp_path / 'cp'}",
            "windows.slide=5 minutes",
            "windows.watermark=1 minute",
        ],
    )
    job.run_until_idle(spark, job.start(spark, config, once=True))
    lakehouse = Lakehouse(spark, config.lakehouse.path, engine="delta-spark")
    assert lakehouse.read("telemetry_raw").count() == records
    assert lakehouse.read("balance_plans").count() == 1


def test_native_connector_without_its_jar_fails_with_a_clear_message(spark, tmp_path):
    if kafka_jar_available(spark):
        pytest.skip("the Kafka connector jar is loaded; the missing-jar message cannot be shown")
    config = load_config(
        None,
        [
            "source.connector=native",
            f"lakehouse.path={tmp_path / 'lh'}",
            "lakehouse.engine=delta-rs",
            f"checkpoint.path={tmp_path / 'cp'}",
        ],
    )
    with pytest.raises(RuntimeError, match=r"spark-sql-kafka.*or set source\.connector=python"):
        job.start(spark, config, once=True)


def test_delta_spark_engine_without_its_jar_fails_with_a_clear_message(spark, tmp_path):
    if delta_jar_available(spark):
        pytest.skip("the Delta jar is loaded; the missing-jar message cannot be shown")
    with pytest.raises(RuntimeError, match=r"delta-spark.*or set lakehouse\.engine=delta-rs"):
        Lakehouse(spark, tmp_path / "lh", engine="delta-spark")
