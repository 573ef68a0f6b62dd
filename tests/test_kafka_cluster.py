"""The real Kafka fixture itself: three KRaft brokers, one rack each, a SCRAM listener, a restartable node.

Runs on the three real Apache Kafka brokers of the `kafka` fixture.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

pytestmark = [pytest.mark.integration, pytest.mark.no_spark]


def test_three_brokers_each_in_its_own_rack(kafka):
    admin = kafka.admin()
    cluster = admin.describe_cluster(include_authorized_operations=False).result(timeout=30)
    assert sorted(node.id for node in cluster.nodes) == [1, 2, 3]
    assert {node.id: node.rack for node in cluster.nodes} == {1: "rack-a", 2: "rack-b", 3: "rack-c"}


def test_scram_listener_admits_the_fixture_user_and_refuses_a_wrong_password(kafka):
    good = AdminClient({"bootstrap.servers": kafka.sasl_bootstrap_servers, **kafka.sasl_options()})
    assert set(good.list_topics(timeout=30).brokers) == {1, 2, 3}
    errors = []
    bad = AdminClient(
        {
            "bootstrap.servers": kafka.sasl_bootstrap_servers,
            **kafka.sasl_options("wrong"),
            "log_level": 0,
            "error_cb": errors.append,
        }
    )
    with pytest.raises(KafkaException):
        bad.list_topics(timeout=10)
    bad.poll(1)  # serves the error callback
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
