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


def test_a_port_taken_before_the_broker_binds_it_starts_the_cluster_again_on_new_ports(tmp_path):
    # Another program takes a node's port between its choice and the JVM's bind: the node exits at start,
    # and the cluster starts again on ports of its own rather than failing. (A one-node cluster of its own.)
    import socket

    from balancer.demo.kafka_cluster import KafkaCluster

    cluster = KafkaCluster(tmp_path / "kafka", size=1)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        taken = cluster.nodes[0].port
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        with cluster:
            assert cluster.nodes[0].port != taken
            assert set(cluster.admin().list_topics(timeout=30).brokers) == {1}
