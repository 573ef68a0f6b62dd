"""One read of a cluster's consumer groups through its Admin API (confluent-kafka), as a ``Snapshot``.

Per group: ListConsumerGroups, then DescribeConsumerGroups (members with client id, host,
``group.instance.id`` and assigned partitions; the protocol, classic or Kafka 4's broker-side consumer
protocol; the assignor; the state), then OffsetFetch (committed offsets). One ListOffsets request gives the
log end offset of every partition a group is assigned or has committed. The Admin API exposes no group
generation or epoch through confluent-kafka, so rebalances are read from membership changes between reads
(``windows.membership_changes``).

Every group the broker lists is read (``groups`` narrows them by id): a group without members that still
has committed offsets (its consumers stopped, or it only commits) keeps a lag, and that lag is real.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any

from balancer.consumers.model import Group, GroupProtocol, GroupState, Member, Snapshot, TopicPartition
from balancer.redaction import scrub, secret_values

_STATES = {
    "STABLE": GroupState.STABLE,
    "PREPARING_REBALANCING": GroupState.PREPARING_REBALANCE,
    "COMPLETING_REBALANCING": GroupState.COMPLETING_REBALANCE,
    "EMPTY": GroupState.EMPTY,
    "DEAD": GroupState.DEAD,
}
_PROTOCOLS = {"CLASSIC": GroupProtocol.CLASSIC, "CONSUMER": GroupProtocol.CONSUMER}


class ConsumerPollError(RuntimeError):
    """The Admin API did not give the consumer groups (secrets redacted from the message)."""


def _enum_name(value: object) -> str:
    return str(getattr(value, "name", value) or "").upper()


def poll_groups(  # noqa: C901 - one flat pass over the Admin API's answers, each step a guarded read
    bootstrap_servers: str,
    options: Mapping[str, str],
    cluster: str,
    *,
    groups: re.Pattern[str] | None = None,
    timeout_s: float = 30,
) -> Snapshot:
    """Every consumer group of the cluster whose id ``groups`` matches (all when None), read now."""
    if not isinstance(bootstrap_servers, str) or not bootstrap_servers.strip():
        raise ValueError(f"bootstrap_servers: expected 'host:port[,host:port...]', got {bootstrap_servers!r}")
    if "bootstrap.servers" in options:
        raise ValueError("options: 'bootstrap.servers' is given by the bootstrap_servers argument")
    if not isinstance(cluster, str) or not cluster.strip():
        raise ValueError(f"cluster: expected a non-empty name, got {cluster!r}")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not math.isfinite(timeout_s):
        raise ValueError(f"timeout_s: expected seconds > 0, got {timeout_s!r}")
    if timeout_s <= 0:
        raise ValueError(f"timeout_s: expected seconds > 0, got {timeout_s!r}")

    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
    from confluent_kafka import TopicPartition as KafkaTopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    secrets = secret_values(options)

    def failure(what: str, exc: BaseException) -> ConsumerPollError:
        return ConsumerPollError(
            scrub(f"consumer groups of {cluster} from {bootstrap_servers}: {what}: {exc}", secrets)
        )

    deadline = time.monotonic() + timeout_s

    def left() -> float:
        return max(1.0, deadline - time.monotonic())

    def wait(request: Callable[[], Future], what: str):
        """The request's result, asked again while Kafka calls its error retriable (a coordinator still
        loading its groups after a start, a leader moving): a partial read would look like vanished
        groups, so the read is whole or fails."""
        while True:
            try:
                result = request().result(timeout=left())
            except KafkaException as exc:
                if _retriable(exc) and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                raise failure(what, exc) from None
            errors = getattr(result, "errors", None)  # ListConsumerGroups: per-broker errors beside results
            if errors:
                if all(_retriable(e) for e in errors) and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                raise failure(what, errors[0])
            return result

    try:
        admin = AdminClient(
            {**{k: str(v) for k, v in options.items()}, "bootstrap.servers": bootstrap_servers}
        )
    except (KafkaException, ValueError, TypeError) as exc:
        raise failure("invalid client options", exc) from None
    observed_at = datetime.now(UTC)
    listed = wait(lambda: admin.list_consumer_groups(request_timeout=left()), "list groups")
    ids = sorted(g.group_id for g in listed.valid if groups is None or groups.search(g.group_id))
    if not ids:
        return Snapshot(cluster=cluster, observed_at=observed_at, groups=(), end_offsets={})

    def describe(gid: str) -> Callable[[], Future]:
        return lambda: admin.describe_consumer_groups([gid], request_timeout=left())[gid]

    def committed_offsets(gid: str) -> Callable[[], Future]:
        request = [ConsumerGroupTopicPartitions(gid)]
        return lambda: admin.list_consumer_group_offsets(request, request_timeout=left())[gid]

    described = {gid: wait(describe(gid), f"group {gid!r}") for gid in ids}
    read: list[Group] = []
    wanted: set[TopicPartition] = set()
    for gid in ids:
        desc = described[gid]
        offsets = wait(committed_offsets(gid), f"offsets of {gid!r}")
        committed = {
            (tp.topic, int(tp.partition)): int(tp.offset)
            for tp in offsets.topic_partitions or ()
            if tp.error is None and tp.offset >= 0
        }
        members = tuple(
            sorted(
                (
                    Member(
                        member_id=m.member_id,
                        client_id=m.client_id,
                        host=m.host,
                        group_instance_id=m.group_instance_id or None,
                        partitions=tuple(
                            sorted(
                                (tp.topic, int(tp.partition)) for tp in (m.assignment.topic_partitions or ())
                            )
                        ),
                    )
                    for m in desc.members
                ),
                key=lambda m: m.member_id,
            )
        )
        read.append(
            Group(
                group_id=gid,
                protocol=_PROTOCOLS.get(_enum_name(getattr(desc, "type", None)), GroupProtocol.UNKNOWN),
                assignor=desc.partition_assignor or "",
                state=_STATES.get(_enum_name(desc.state), GroupState.UNKNOWN),
                members=members,
                committed=committed,
            )
        )
        wanted |= set(committed) | {tp for m in members for tp in m.partitions}
    end_offsets: dict[TopicPartition, int] = {}
    if wanted:
        latest = {KafkaTopicPartition(t, p): OffsetSpec.latest() for t, p in sorted(wanted)}
        for tp, future in admin.list_offsets(latest, request_timeout=left()).items():
            try:
                end_offsets[(tp.topic, int(tp.partition))] = int(future.result(timeout=left()).offset)
            except KafkaException as exc:
                # A partition deleted since the group committed to it has no end: its lag is unknown.
                name = _enum_name(exc.args[0].name() if exc.args and hasattr(exc.args[0], "name") else "")
                if "UNKNOWN_TOPIC" not in name:
                    raise failure(f"end offset of {tp.topic}-{tp.partition}", exc) from None
    return Snapshot(cluster=cluster, observed_at=observed_at, groups=tuple(read), end_offsets=end_offsets)


# Transient by Kafka's protocol (RetriableException subclasses in the Java client); librdkafka flags
# retriable() only on errors its own retries saw, so a fresh error's code is checked too.
_TRANSIENT = {
    "COORDINATOR_LOAD_IN_PROGRESS",
    "COORDINATOR_NOT_AVAILABLE",
    "NOT_COORDINATOR",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_FOR_PARTITION",
    "REQUEST_TIMED_OUT",
    "_TRANSPORT",
    "_TIMED_OUT",
}


def _retriable(error: Any) -> bool:
    """Whether ``error`` (a KafkaError, or a KafkaException holding one) is worth asking again."""
    args = getattr(error, "args", None)
    if not hasattr(error, "retriable") and args:
        error = args[0]
    if not hasattr(error, "retriable"):
        return False
    return bool(error.retriable()) or error.name() in _TRANSIENT
