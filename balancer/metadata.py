"""The monitored cluster's topology: partitions (replicas in assignment order, leader, ISR) and broker racks.

Cruise Control's metric records carry none of it; Cruise Control reads it from the cluster's own
metadata (``MetadataClient``). Two sources, one result (:class:`ClusterMetadata`):

- :func:`read_metadata_file`: the planner's snapshot JSON without loads, for offline use and tests::

      {"cluster": "prod-eu-1", "brokers": [{"id": 1, "rack": "eu-1a"}, ...],
       "partitions": [{"topic": "orders", "partition": 0, "replicas": [1, 2, 3], "leader": 1,
                       "isr": [1, 2]}, ...]}

  ``isr`` defaults to ``replicas``, ``rack`` to none; other fields (``capacity``, ``bytes_in``, ...) are
  ignored, so a planner snapshot file is a metadata file too.
- :func:`poll_metadata`: the cluster's Admin API through confluent-kafka.

Every topic the cluster reports is kept, internal ones (``__consumer_offsets``, the metrics topic)
included: Cruise Control models them too, and their replicas load the brokers like any other.

:func:`topology_rows` and :func:`changed_rows` turn a topology into ``cluster_metadata`` rows (all of
it, or what changed since the previous read).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from balancer.files import read_json
from balancer.redaction import scrub, secret_values

TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")  # Kafka's rule for topic names
MAX_ID = 2**31 - 1
# DescribeCluster errors that mean "this broker does not offer it": racks are then unknown.
_UNSUPPORTED = ("UNSUPPORTED_VERSION", "_UNSUPPORTED_FEATURE", "INVALID_REQUEST", "UNSUPPORTED")


class MetadataError(ValueError):
    """A metadata file or argument that cannot be used; the message names the item."""


class MetadataPollError(RuntimeError):
    """The cluster's Admin API did not give its metadata (secrets redacted from the message)."""


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    replicas: tuple[int, ...]  # in assignment order: replicas[0] is the preferred leader
    leader: int | None  # None: no leader (offline)
    isr: tuple[int, ...]


@dataclass(frozen=True)
class ClusterMetadata:
    cluster: str
    brokers: Mapping[int, str | None]  # id -> rack (live brokers; None: unknown)
    partitions: tuple[PartitionInfo, ...]  # sorted by (topic, partition)


# --- the snapshot file -------------------------------------------------------------------------------


def read_metadata_file(path: str | Path, cluster: str | None = None) -> ClusterMetadata:
    """The topology in a snapshot JSON file. ``cluster``, when given, names the cluster: the file's own
    ``cluster`` may then be absent, and must match when present (a file of another cluster is a mistake)."""
    if cluster is not None and (not isinstance(cluster, str) or not cluster.strip()):
        raise MetadataError(f"cluster: expected a non-empty name or None, got {cluster!r}")
    doc = read_json(path, what="metadata file", error=MetadataError)
    try:
        return parse_metadata(doc, cluster=cluster)
    except MetadataError as e:
        raise MetadataError(f"metadata file {path}: {e}") from None


def parse_metadata(doc: object, *, cluster: str | None = None) -> ClusterMetadata:  # noqa: C901 - one check per field of the file, in the file's order
    """The topology a parsed snapshot document describes (see :func:`read_metadata_file`)."""
    if not isinstance(doc, dict):
        raise MetadataError(
            f"expected a JSON object with 'brokers' and 'partitions', got {type(doc).__name__}"
        )
    named = doc.get("cluster")
    if named is not None and (not isinstance(named, str) or not named.strip()):
        raise MetadataError(f"'cluster': expected a non-empty string, got {named!r}")
    if cluster is not None and named is not None and named != cluster:
        raise MetadataError(f"'cluster' is {named!r}, but this job reads cluster {cluster!r}")
    name = cluster if cluster is not None else named
    if name is None:
        raise MetadataError(
            "'cluster': missing (name the cluster in the file or in the job's source.cluster)"
        )

    brokers_doc = doc.get("brokers")
    if not isinstance(brokers_doc, list):
        raise MetadataError('\'brokers\': expected a list of {"id", "rack"}')
    brokers: dict[int, str | None] = {}
    for i, item in enumerate(brokers_doc):
        where = f"brokers[{i}]"
        if not isinstance(item, dict):
            raise MetadataError(f"{where}: expected an object with 'id'")
        broker = _id(item.get("id"), f"{where}.id")
        if broker in brokers:
            raise MetadataError(f"{where}: broker {broker} is listed twice")
        rack = item.get("rack")
        if rack is not None and not isinstance(rack, str):
            raise MetadataError(f"{where} (broker {broker}).rack: expected a string or null, got {rack!r}")
        brokers[broker] = rack or None

    partitions_doc = doc.get("partitions")
    if not isinstance(partitions_doc, list):
        raise MetadataError('\'partitions\': expected a list of {"topic", "partition", "replicas", "leader"}')
    partitions: dict[tuple[str, int], PartitionInfo] = {}
    for i, item in enumerate(partitions_doc):
        where = f"partitions[{i}]"
        if not isinstance(item, dict):
            raise MetadataError(f"{where}: expected an object")
        topic = item.get("topic")
        if not isinstance(topic, str) or not TOPIC_NAME.fullmatch(topic):
            raise MetadataError(
                f"{where}.topic: expected a Kafka topic name ([a-zA-Z0-9._-], 1 to 249), got {topic!r}"
            )
        partition = _id(item.get("partition"), f"{where}.partition")
        where = f"{where} ({topic}-{partition})"
        if (topic, partition) in partitions:
            raise MetadataError(f"{where}: partition listed twice")
        replicas = _ids(item.get("replicas"), f"{where}.replicas", empty=False)
        leader = item.get("leader")
        if leader is not None and leader != -1:  # -1 is Kafka's "no leader"
            leader = _id(leader, f"{where}.leader")
            if leader not in replicas:
                raise MetadataError(f"{where}.leader: {leader} is not one of its replicas {list(replicas)}")
        else:
            leader = None
        isr = replicas if item.get("isr") is None else _ids(item.get("isr"), f"{where}.isr", empty=True)
        strays = [b for b in isr if b not in replicas]
        if strays:
            raise MetadataError(f"{where}.isr: {strays[0]} is not one of its replicas {list(replicas)}")
        partitions[(topic, partition)] = PartitionInfo(topic, partition, replicas, leader, isr)
    return ClusterMetadata(
        cluster=name, brokers=brokers, partitions=tuple(partitions[k] for k in sorted(partitions))
    )


def _id(value: object, where: str) -> int:
    """A broker or partition id: an integer in [0, 2^31)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_ID:
        raise MetadataError(f"{where}: expected an integer in [0, {MAX_ID}], got {value!r}")
    return value


def _ids(value: object, where: str, *, empty: bool) -> tuple[int, ...]:
    if not isinstance(value, list) or (not value and not empty):
        raise MetadataError(
            f"{where}: expected a {'' if empty else 'non-empty '}list of broker ids, got {value!r}"
        )
    ids = tuple(_id(v, f"{where}[{i}]") for i, v in enumerate(value))
    if len(set(ids)) != len(ids):
        raise MetadataError(f"{where}: a broker is listed twice in {list(ids)}")
    return ids


# --- the Admin API -----------------------------------------------------------------------------------


def _check_poll_arguments(
    bootstrap_servers: str, options: Mapping[str, str], cluster: str, timeout_s: float
) -> None:
    """``poll_metadata``'s arguments, each refused with a MetadataError naming it."""
    if not isinstance(bootstrap_servers, str) or not bootstrap_servers.strip():
        raise MetadataError(
            f"bootstrap_servers: expected 'host:port[,host:port...]', got {bootstrap_servers!r}"
        )
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        raise MetadataError("options: expected a mapping of Kafka client property names to values")
    if "bootstrap.servers" in options:
        raise MetadataError(
            "options: 'bootstrap.servers' is given by the bootstrap_servers argument, not options"
        )
    if not isinstance(cluster, str) or not cluster.strip():
        raise MetadataError(f"cluster: expected a non-empty name, got {cluster!r}")
    if (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, (int, float))
        or not math.isfinite(timeout_s)
        or timeout_s <= 0
    ):
        raise MetadataError(f"timeout_s: expected a number of seconds > 0, got {timeout_s!r}")


def poll_metadata(
    bootstrap_servers: str, options: Mapping[str, str], cluster: str, *, timeout_s: float = 30
) -> ClusterMetadata:
    """The cluster's topology from its Admin API.

    Partitions, replicas (assignment order), leaders and ISRs come from a metadata request
    (``AdminClient.list_topics``); racks from DescribeCluster, a broker without one getting its
    host as rack, as Cruise Control does (``MonitorUtils.getRackHandleNull``). A broker that does not
    offer DescribeCluster leaves every rack None (unknown). ``options`` go to the client unchanged
    (``security.protocol``, ``sasl.*``, ``ssl.*``); the values of secret ones never appear in errors.
    """
    _check_poll_arguments(bootstrap_servers, options, cluster, timeout_s)

    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    secrets = secret_values(options)

    def failure(what: str, exc: BaseException) -> MetadataPollError:
        return MetadataPollError(
            scrub(f"metadata of {cluster} from {bootstrap_servers}: {what}: {exc}", secrets)
        )

    deadline = time.monotonic() + timeout_s
    try:
        admin = AdminClient(
            {**{k: str(v) for k, v in options.items()}, "bootstrap.servers": bootstrap_servers}
        )
    except (KafkaException, ValueError, TypeError) as exc:  # a bad client property: retrying cannot help
        raise failure("invalid client options", exc) from None
    try:
        listed = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise failure("metadata request failed", exc) from None

    partitions: list[PartitionInfo] = []
    for topic, meta in listed.topics.items():
        if meta.error is not None:
            # Transient (a topic being created or deleted); reporting it as deleted would be wrong.
            raise failure(f"topic {topic!r}", meta.error)
        for partition, p in meta.partitions.items():
            replicas = tuple(int(b) for b in p.replicas)
            leader = int(p.leader) if p.leader is not None and p.leader >= 0 else None
            partitions.append(
                PartitionInfo(
                    topic=topic,
                    partition=int(partition),
                    replicas=replicas,
                    leader=leader,
                    isr=tuple(int(b) for b in p.isrs),
                )
            )
    partitions.sort(key=lambda p: (p.topic, p.partition))

    hosts = {int(b): m.host for b, m in listed.brokers.items()}
    racks: dict[int, str | None] = dict.fromkeys(hosts)
    remaining = max(1.0, deadline - time.monotonic())
    try:
        described = admin.describe_cluster(
            include_authorized_operations=False, request_timeout=remaining
        ).result(timeout=remaining)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        name = error.name() if hasattr(error, "name") else str(exc)
        if not any(u in name for u in _UNSUPPORTED):
            raise failure("describe cluster failed", exc) from None
    else:
        nodes = {int(n.id): n for n in described.nodes}
        for broker in racks:
            node = nodes.get(broker)
            racks[broker] = (node.rack if node is not None and node.rack else None) or hosts[broker]
    return ClusterMetadata(cluster=cluster, brokers=racks, partitions=tuple(partitions))


# --- rows of cluster_metadata ------------------------------------------------------------------------


def _row(cluster: str, observed_at: datetime, p: PartitionInfo) -> dict:
    return {
        "cluster": cluster,
        "observed_at": observed_at,
        "topic": p.topic,
        "partition": p.partition,
        "replicas": list(p.replicas),
        "leader": p.leader,
        "isr": list(p.isr),
    }


def _check_time(observed_at: object) -> None:
    if not isinstance(observed_at, datetime):
        raise MetadataError(f"observed_at: expected a datetime, got {observed_at!r}")


def _same(a: PartitionInfo | None, b: PartitionInfo) -> bool:
    # The ISR is a set: Kafka may list it in another order without anything changing.
    return a is not None and a.replicas == b.replicas and a.leader == b.leader and set(a.isr) == set(b.isr)


def topology_rows(meta: ClusterMetadata, observed_at: datetime) -> list[dict]:
    """One ``cluster_metadata`` row per partition of ``meta``."""
    _check_time(observed_at)
    return [_row(meta.cluster, observed_at, p) for p in meta.partitions]


def changed_rows(
    previous: ClusterMetadata | None, current: ClusterMetadata, observed_at: datetime
) -> list[dict]:
    """``cluster_metadata`` rows for what changed from ``previous`` to ``current``.

    A partition that is new or whose replicas (order included: it names the preferred leader), leader or
    ISR (as a set) changed; a deleted partition as a row with no replicas, no leader and no ISR. Everything
    when ``previous`` is None."""
    _check_time(observed_at)
    if previous is None:
        return topology_rows(current, observed_at)
    if previous.cluster != current.cluster:
        raise MetadataError(f"previous: cluster {previous.cluster!r} is not current's {current.cluster!r}")
    before = {(p.topic, p.partition): p for p in previous.partitions}
    now = {(p.topic, p.partition): p for p in current.partitions}
    rows = [_row(current.cluster, observed_at, p) for key, p in now.items() if not _same(before.get(key), p)]
    rows += [
        {
            "cluster": current.cluster,
            "observed_at": observed_at,
            "topic": topic,
            "partition": partition,
            "replicas": [],
            "leader": None,
            "isr": [],
        }
        for (topic, partition) in before
        if (topic, partition) not in now
    ]
    rows.sort(key=lambda r: (r["topic"], r["partition"]))
    return rows
