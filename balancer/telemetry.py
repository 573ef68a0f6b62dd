"""Telemetry format v1: what brokers publish to the metrics topic (pure Python; no Spark).

One JSON object per Kafka record. Rates are bytes/second (the broker's one-minute rate
at ``ts``), ``ts`` is epoch milliseconds.

partition record, sent by every broker for every replica it hosts::

    {"v":1,"type":"partition","ts":…,"cluster":"prod-eu-1","broker":3,"topic":"orders",
     "partition":7,"leader":true,"replicas":[3,1,5],"bytes_in":…,"bytes_out":…,
     "messages_in":…,"size":…}

broker record::

    {"v":1,"type":"broker","ts":…,"cluster":…,"broker":3,"rack":"eu-1a",
     "capacity":{"network_in":…,"network_out":…,"disk":…},"cpu":0.41}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from balancer.vocabulary import RESOURCES

VERSION = 1
RECORD_TYPES = ("partition", "broker")

FieldType = Literal["int", "long", "double", "bool", "string", "int_array", "capacity"]


@dataclass(frozen=True)
class Field:
    name: str
    type: FieldType
    required_for: tuple[str, ...]  # record types that must carry it
    non_negative: bool = False


FIELDS: tuple[Field, ...] = (
    Field("v", "int", RECORD_TYPES),
    Field("type", "string", RECORD_TYPES),
    Field("ts", "long", RECORD_TYPES),
    Field("cluster", "string", RECORD_TYPES),
    Field("broker", "int", RECORD_TYPES, non_negative=True),
    Field("topic", "string", ("partition",)),
    Field("partition", "int", ("partition",), non_negative=True),
    Field("leader", "bool", ("partition",)),
    Field("replicas", "int_array", ("partition",)),
    Field("bytes_in", "double", ("partition",), non_negative=True),
    Field("bytes_out", "double", ("partition",), non_negative=True),
    Field("messages_in", "double", ("partition",), non_negative=True),
    Field("size", "double", ("partition",), non_negative=True),
    Field("rack", "string", ()),
    Field("capacity", "capacity", ("broker",)),
    Field("cpu", "double", (), non_negative=True),
)
CAPACITY_KEYS = RESOURCES  # a broker record's capacity object

# Plausible event times: after 2015-01-01 and at most this far ahead of the job's clock.
MIN_TS_MS = 1_420_070_400_000
MAX_CLOCK_SKEW_MS = 3_600_000
MAX_BROKER_ID = 2**31 - 1
# Kafka's own rule for topic names.
TOPIC_NAME_PATTERN = r"^[a-zA-Z0-9._-]{1,249}$"


def partition_record(
    *,
    ts: int,
    cluster: str,
    broker: int,
    topic: str,
    partition: int,
    leader: bool,
    replicas: list[int],
    bytes_in: float,
    bytes_out: float,
    messages_in: float,
    size: float,
) -> dict:
    return {
        "v": VERSION,
        "type": "partition",
        "ts": ts,
        "cluster": cluster,
        "broker": broker,
        "topic": topic,
        "partition": partition,
        "leader": leader,
        "replicas": list(replicas),
        "bytes_in": bytes_in,
        "bytes_out": bytes_out,
        "messages_in": messages_in,
        "size": size,
    }


def broker_record(
    *,
    ts: int,
    cluster: str,
    broker: int,
    rack: str | None,
    network_in: float,
    network_out: float,
    disk: float,
    cpu: float | None = None,
) -> dict:
    record = {
        "v": VERSION,
        "type": "broker",
        "ts": ts,
        "cluster": cluster,
        "broker": broker,
        "capacity": {"network_in": network_in, "network_out": network_out, "disk": disk},
    }
    if rack is not None:
        record["rack"] = rack
    if cpu is not None:
        record["cpu"] = cpu
    return record


def encode(record: dict) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode()
