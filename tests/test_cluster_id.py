"""The test cluster's id: what ``kafka-storage format --cluster-id`` accepts (no broker needed)."""

from __future__ import annotations

import uuid

from balancer.demo import kafka_cluster


def test_a_cluster_id_never_starts_with_a_dash_the_storage_tool_would_read_as_an_option(monkeypatch):
    dash = uuid.UUID(bytes=bytes([0xF8]) + bytes(15))  # base64 of a first byte 0xF8-0xFB begins with '-'
    plain = uuid.UUID(bytes=bytes([0x10]) + bytes(15))
    drawn = iter([dash, plain])
    monkeypatch.setattr(kafka_cluster.uuid, "uuid4", lambda: next(drawn))
    assert kafka_cluster.random_cluster_id() == "EAAAAAAAAAAAAAAAAAAAAA"
    monkeypatch.undo()
    for _ in range(2000):  # one UUID in 64 encodes to a leading '-'
        cluster_id = kafka_cluster.random_cluster_id()
        assert len(cluster_id) == 22 and not cluster_id.startswith("-"), cluster_id
