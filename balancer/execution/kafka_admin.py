"""The executor's :class:`~balancer.execution.executor.ClusterAdmin` on kafka-python's admin client.

Why kafka-python and not the project's other Kafka client or Kafka's own Java tools:

- confluent-kafka (librdkafka, 2.16) has no AlterPartitionReassignments nor
  ListPartitionReassignments in its AdminClient (checked: ``dir(AdminClient)`` lists neither), and
  the executor cannot work without them.
- Kafka's own tools (``kafka-reassign-partitions``, ``kafka-configs``, ``kafka-leader-election`` from
  jvm/lib/kafka) can do it all, but each call is a JVM start (1-3 s on a busy machine) and the
  answers are text meant for people: polling a batch every few seconds, per partition, would
  parse that text. They stay what ``run.sh`` uses (bin/kafka-*.sh).
- kafka-python 3.0 is pure Python, speaks every call the executor needs (KIP-455 reassignments and
  their cancellation, ElectLeaders, IncrementalAlterConfigs, DescribeConfigs, DescribeLogDirs) and
  returns structured answers, in this process.

Connection settings come as librdkafka-style keys (``security.protocol``, ``sasl.*``, ``ssl.*``: the
spelling the config uses everywhere) and are mapped to kafka-python's; a key with no mapping is an
error naming it rather than being dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from balancer.kafka_python import kafka_python_options

from .executor import (
    RATE_KEYS,
    REPLICA_KEYS,
    ExecutionError,
    PartitionState,
    Reassigning,
    ThrottledReplicas,
    TopicPartition,
)

T = TypeVar("T")


def client_options(options: Mapping[str, str]) -> dict[str, object]:
    """``executor.options`` as kafka-python arguments; :class:`ExecutionError` names a key it cannot map."""
    try:
        return kafka_python_options(options, key="executor.options key")
    except ValueError as exc:
        raise ExecutionError(str(exc)) from None


class KafkaPythonAdmin:
    """One admin connection to the cluster at ``bootstrap_servers``; close it when done."""

    def __init__(self, bootstrap_servers: str, options: Mapping[str, str] | None = None):
        from kafka.admin import KafkaAdminClient
        from kafka.errors import KafkaError

        try:
            self.client = KafkaAdminClient(
                bootstrap_servers=bootstrap_servers.split(","),
                client_id="balancer-execute",
                **client_options(options or {}),
            )
        except KafkaError as error:
            raise ExecutionError(
                f"Kafka brokers {bootstrap_servers} unreachable for the executor ({error}); check "
                "executor.bootstrap_servers and executor.options"
            ) from None

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> KafkaPythonAdmin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def live_brokers(self) -> set[int]:
        return {b["broker_id"] for b in self.client.describe_cluster()["brokers"] if not b.get("is_fenced")}

    def partitions(self, topics: Iterable[str]) -> dict[TopicPartition, PartitionState]:
        out = {}
        for topic in self.client.describe_topics(sorted(set(topics))):
            for p in topic["partitions"]:
                leader = p["leader_id"]
                out[(topic["name"], p["partition_index"])] = PartitionState(
                    tuple(p["replica_nodes"]), leader if leader is not None and leader >= 0 else None
                )
        return out

    def _to_controller(self, call: Callable[[], T], attempts: int = 5) -> T:
        """``call``, a request kafka-python routes to "the controller". Under KRaft that is any broker
        the metadata names, and kafka-python keeps the first one it was told: once that broker leaves
        (stopped, restarted), every such request fails with UnknownBrokerIdError or a connection error
        although the rest of the cluster answers. Ask again for a broker that is there; until the
        cluster fences the one that left, the metadata may still name it, hence a few tries."""
        from kafka.errors import KafkaConnectionError, NodeNotReadyError, UnknownBrokerIdError

        for attempt in range(1, attempts + 1):
            try:
                return call()
            except (UnknownBrokerIdError, NodeNotReadyError, KafkaConnectionError):
                if attempt == attempts:
                    raise
                self.client._controller_id = None  # kafka-python asks again when it is None
                time.sleep(1.0)
        raise AssertionError("unreachable")

    def reassignments(self) -> dict[TopicPartition, Reassigning]:
        return {
            (tp.topic, tp.partition): Reassigning(
                tuple(r["replicas"]), tuple(r["adding_replicas"]), tuple(r["removing_replicas"])
            )
            for tp, r in self._to_controller(self.client.list_partition_reassignments).items()
        }

    def reassign(self, targets: Mapping[TopicPartition, Sequence[int] | None]) -> dict[TopicPartition, str]:
        from kafka import TopicPartition as KafkaTopicPartition

        wanted = {
            KafkaTopicPartition(t, p): (None if r is None else list(r)) for (t, p), r in targets.items()
        }
        answer = self._to_controller(lambda: self.client.alter_partition_reassignments(wanted))
        refused = {}
        for tp, error in answer.items():
            # Cancelling a partition whose reassignment just finished is no error for us.
            if error is not None and not (
                targets[(tp.topic, tp.partition)] is None and _no_reassignment(error)
            ):
                refused[(tp.topic, tp.partition)] = _error_text(error)
        return refused

    def elect_preferred(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, str]:
        wanted: dict[str, list[int]] = {}
        for topic, partition in partitions:
            wanted.setdefault(topic, []).append(partition)
        response = self._to_controller(lambda: self.client.elect_leaders(0, wanted, raise_errors=False))
        refused = {}
        for result in response.replica_election_results:
            for p in result.partition_result:
                if p.error_code not in (0, 84):  # 84: ELECTION_NOT_NEEDED (already the preferred leader)
                    refused[(result.topic, p.partition_id)] = p.error_message or f"error code {p.error_code}"
        return refused

    def set_throttles(self, rates: Mapping[int, int], replicas: ThrottledReplicas) -> None:
        from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

        resources = [
            ConfigResource(
                ConfigResourceType.BROKER,
                str(b),
                configs={k: (AlterConfigOp.SET, str(int(r))) for k in RATE_KEYS},
            )
            for b, r in sorted(rates.items())
        ] + _list_edits(AlterConfigOp.APPEND, replicas)  # Kafka adds only the entries not listed yet
        failed = _failures(self.client.alter_configs(resources, raise_on_unknown=False, incremental=True))
        if failed:
            raise ExecutionError(
                "setting the throttles failed: " + "; ".join(f"{k}: {v}" for k, v in failed.items())
            )

    def remove_throttles(
        self, brokers: Iterable[int], replicas: ThrottledReplicas, whole_topics: Iterable[str] = ()
    ) -> dict[str, str]:
        from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

        left: dict[str, str] = {}
        resources = (
            [
                ConfigResource(
                    ConfigResourceType.BROKER,
                    str(b),
                    configs={k: (AlterConfigOp.DELETE, None) for k in RATE_KEYS},
                )
                for b in sorted(set(brokers))
            ]
            + _list_edits(AlterConfigOp.SUBTRACT, replicas)  # only these entries leave; an operator's stay
            + [
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    t,
                    configs={k: (AlterConfigOp.DELETE, None) for k in REPLICA_KEYS},
                )
                for t in sorted(set(whole_topics))
            ]
        )
        # One request per resource: a broker that is down (its own configs go to it) must not keep the
        # others' throttles in place.
        for resource in resources:
            left.update(self._alter_one(resource))
        # A list left empty by SUBTRACT stays set to "": delete it, as Kafka's own tool leaves none.
        emptied = sorted({t for t in replicas if f"topic {t}" not in left})
        if emptied:
            try:
                current = self.throttles((), emptied)
            except Exception as error:  # not readable now: an empty list throttles nothing, leave it
                left.update({f"topic {t}": str(error) or type(error).__name__ for t in emptied})
                return left
            for topic in emptied:
                empty = [k for k in REPLICA_KEYS if k not in current.get(f"topic {topic}", {})]
                if empty:
                    left.update(
                        self._alter_one(
                            ConfigResource(
                                ConfigResourceType.TOPIC,
                                topic,
                                configs={k: (AlterConfigOp.DELETE, None) for k in empty},
                            )
                        )
                    )
        return left

    def _alter_one(self, resource: Any) -> dict[str, str]:
        """One IncrementalAlterConfigs request; the resource it could not change ("topic t": why), if any."""
        from kafka.errors import KafkaError

        name = f"{resource.resource_type.name.lower()} {resource.name}"
        try:
            return _failures(self.client.alter_configs([resource], raise_on_unknown=False, incremental=True))
        except KafkaError as error:
            return {name: _error_text(error)}
        except Exception as error:  # kafka-python raises plain errors for a node it cannot reach
            return {name: str(error) or type(error).__name__}

    def throttles(self, brokers: Iterable[int], topics: Iterable[str]) -> dict[str, dict[str, str]]:
        from kafka.admin import ConfigResource, ConfigResourceType

        resources = [ConfigResource(ConfigResourceType.BROKER, str(b)) for b in sorted(set(brokers))] + [
            ConfigResource(ConfigResourceType.TOPIC, t) for t in sorted(set(topics))
        ]
        described = self.client.describe_configs(resources)
        out = {}
        for kind, keys in (("broker", RATE_KEYS), ("topic", REPLICA_KEYS)):
            for name, configs in described.get(kind, {}).items():
                out[f"{kind} {name}"] = {
                    k: configs[k]["value"]
                    for k in keys
                    if k in configs and configs[k]["value"] not in (None, "")
                }
        return out

    def replica_bytes(self, replicas: Mapping[int, Iterable[TopicPartition]]) -> int:
        total = 0
        for broker, tps in replicas.items():
            wanted = set(tps)
            try:
                answer = self.client.describe_log_dirs(brokers=[broker])
            except Exception:  # a broker that does not answer shows no progress
                continue
            for entry in answer:
                for log_dir in entry.get("log_dirs", []):
                    for topic in log_dir.get("topics", []):
                        for p in topic.get("partitions", []):
                            if (topic["name"], p["partition_index"]) in wanted:
                                total += int(p["partition_size"])
        return total


def _list_edits(op: Any, replicas: ThrottledReplicas) -> list[Any]:
    """One topic resource per topic that edits its (leader, follower) throttled-replica lists by ``op``
    (IncrementalAlterConfigs APPEND or SUBTRACT) with the given entries."""
    from kafka.admin import ConfigResource, ConfigResourceType

    return [
        ConfigResource(
            ConfigResourceType.TOPIC,
            topic,
            configs={
                key: (op, ",".join(entries))
                for key, entries in zip(REPLICA_KEYS, (leaders, followers), strict=True)
                if entries
            },
        )
        for topic, (leaders, followers) in sorted(replicas.items())
        if leaders or followers
    ]


def _failures(answer: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    return {
        f"{kind} {name}": result
        for kind, by_name in answer.items()
        for name, result in by_name.items()
        if result != "OK"
    }


def _no_reassignment(error: object) -> bool:
    return "NoReassignmentInProgress" in getattr(error, "__name__", type(error).__name__)


def _error_text(error: object) -> str:
    name = getattr(error, "__name__", None) or type(error).__name__
    message = getattr(error, "description", None) or str(error)
    return f"{name}: {message}" if message and message != name else name
