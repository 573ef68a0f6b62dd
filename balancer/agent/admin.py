"""The Admin API alone, for clusters where no exporter runs: nothing to install on the brokers.

Each interval, from the cluster's own answers:

- replica sizes: DescribeLogDirs, every broker's every replica (kafka-python: confluent-kafka has no
  DescribeLogDirs) -> PARTITION_SIZE;
- messages in per partition: the change of its end offset (ListOffsets) over the interval;
- bytes in per partition: the change of the leader's log size when the log did not lose a segment to
  retention meanwhile (exactly the bytes appended), else messages in x the log's bytes per message
  (size / (end offset - start offset));
- consumer fetch (bytes out) per partition: the change of every consumer group's committed offset, x the
  log's bytes per message. Consumers that commit no offsets are not seen, so this is a lower bound.

Rates are summed per (leader, topic) into the TOPIC_* metrics the reporter sends, and per leader into the
ALL_TOPIC_* ones. A partition whose rate is unknown this interval (first reading, a gap, an offset that went
back because the topic was recreated, a partition that vanished mid-read) makes its (leader, topic) figure
absent, not smaller: a gap, never a zero.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from balancer import cruise_control as cc
from balancer.agent.measurement import BrokerMeasurement, Problems
from balancer.agent.rates import CounterRates
from balancer.kafka_python import kafka_python_options


@dataclass(frozen=True)
class _Partition:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]


class AdminSource:
    def __init__(
        self,
        bootstrap_servers: str,
        options: Mapping[str, str],
        *,
        timeout_s: float,
        max_gap_s: float,
        max_rate: float,
        max_series: int,
        max_groups: int,
    ):
        from confluent_kafka.admin import AdminClient

        self.bootstrap_servers = bootstrap_servers
        self.options = dict(options)
        self._kp_options = kafka_python_options(self.options, key="agent.options key")
        self.timeout_s = timeout_s
        self.max_groups = max_groups
        self.admin = AdminClient({**self.options, "bootstrap.servers": bootstrap_servers})
        self._log_dirs_client = None
        self.offsets = CounterRates(max_gap_s=max_gap_s, max_rate=max_rate, max_series=max_series)
        self.max_gap_s = max_gap_s
        self.max_rate = max_rate
        self.max_series = max_series
        # (leader, topic, partition) -> (size, start offset, at_s): the last reading of the leader's log
        self._logs: dict[tuple[int, str, int], tuple[float, int, float]] = {}
        self.unmapped = Problems()
        self.failures = Problems()
        self.ignored = 0

    def close(self) -> None:
        if self._log_dirs_client is not None:
            try:
                self._log_dirs_client.close()
            except Exception:
                pass
            self._log_dirs_client = None

    # -- reading the cluster -------------------------------------------------------------------------
    def _topology(self) -> tuple[list[_Partition], set[int]]:
        listed = self.admin.list_topics(timeout=self.timeout_s)
        partitions = []
        for topic, meta in listed.topics.items():
            if meta.error is not None:  # a topic being created or deleted
                self.unmapped.add("topic with a metadata error (being created or deleted)")
                continue
            for number, p in meta.partitions.items():
                if p.leader is None or p.leader < 0:
                    continue
                partitions.append(
                    _Partition(topic, int(number), int(p.leader), tuple(int(b) for b in p.replicas))
                )
        return partitions, {int(b) for b in listed.brokers}

    def _log_dirs(self) -> dict[int, dict[tuple[str, int], float]]:
        from kafka.admin import KafkaAdminClient

        if self._log_dirs_client is None:
            self._log_dirs_client = KafkaAdminClient(
                bootstrap_servers=self.bootstrap_servers,
                request_timeout_ms=int(self.timeout_s * 1000),
                **self._kp_options,
            )
        sizes: dict[int, dict[tuple[str, int], float]] = {}
        for answer in self._log_dirs_client.describe_log_dirs():
            broker = int(answer["broker"])
            replicas = sizes.setdefault(broker, {})
            for log_dir in answer.get("log_dirs", []):
                if log_dir.get("error_code", 0) != 0:
                    self.unmapped.add("log dir with an error (offline)")
                    continue
                for topic in log_dir.get("topics", []):
                    for p in topic.get("partitions", []):
                        if p.get("is_future_key"):  # a replica being moved here: not the broker's yet
                            continue
                        replicas[(topic["name"], int(p["partition_index"]))] = float(p["partition_size"])
        return sizes

    def _offsets(self, partitions: list[_Partition], spec) -> dict[tuple[str, int], int]:
        from confluent_kafka import KafkaException, TopicPartition

        if not partitions:
            return {}
        request = {TopicPartition(p.topic, p.partition): spec for p in partitions}
        futures = self.admin.list_offsets(request, request_timeout=self.timeout_s)
        found = {}
        for tp, future in futures.items():
            try:
                found[(tp.topic, tp.partition)] = int(future.result(timeout=self.timeout_s).offset)
            except KafkaException:
                self.unmapped.add("partition whose offsets could not be read (deleted or moving)")
        return found

    def _committed(self) -> dict[tuple[str, str, int], int] | None:
        """(group, topic, partition) -> committed offset, for up to max_groups groups; None: not readable."""
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException

        try:
            listed = self.admin.list_consumer_groups(request_timeout=self.timeout_s).result(
                timeout=self.timeout_s
            )
        except KafkaException as exc:
            self.failures.add(f"consumer groups not listed: {exc}")
            return None
        groups = sorted(g.group_id for g in listed.valid)
        if len(groups) > self.max_groups:
            self.unmapped.add("consumer groups over agent.max_consumer_groups", len(groups) - self.max_groups)
            groups = groups[: self.max_groups]
        committed: dict[tuple[str, str, int], int] = {}
        for group in groups:
            try:
                futures = self.admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout_s
                )
                result = futures[group].result(timeout=self.timeout_s)
            except KafkaException:
                self.unmapped.add("consumer group whose offsets could not be read")
                continue
            for tp in result.topic_partitions or []:
                if tp.error is None and tp.offset >= 0:
                    committed[(group, tp.topic, tp.partition)] = int(tp.offset)
        return committed

    # -- one interval ----------------------------------------------------------------------------------
    def measure(self) -> tuple[list[BrokerMeasurement], dict[int, str]]:  # noqa: C901 - one pass per Admin call, each guarded
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import OffsetSpec

        failed: dict[int, str] = {}
        try:
            partitions, brokers = self._topology()
        except KafkaException as exc:
            self.failures.add(f"metadata not read: {exc}")
            return [], {-1: f"metadata not read: {exc}"}
        try:
            sizes = self._log_dirs()
        except Exception as exc:  # kafka-python raises its own errors and OSError
            self.close()
            self.failures.add(f"log dirs not described: {type(exc).__name__}")
            return [], {b: f"log dirs not described: {exc}" for b in sorted(brokers)}
        for broker in sorted(brokers - set(sizes)):
            failed[broker] = "no DescribeLogDirs answer"
        try:
            ends = self._offsets(partitions, OffsetSpec.latest())
            starts = self._offsets(partitions, OffsetSpec.earliest())
        except KafkaException as exc:
            self.failures.add(f"offsets not listed: {exc}")
            ends, starts = {}, {}
        committed = self._committed()
        at_s = time.time()
        ts = int(at_s * 1000)

        measurements = {b: BrokerMeasurement(broker=b, ts=ts, sizes=sizes[b]) for b in sorted(set(sizes))}
        consumed: dict[tuple[str, int], float] = {}
        if committed is not None:
            for (group, topic, number), offset in committed.items():
                rate = self.offsets.update(("committed", group, topic, number), offset, at_s)
                if rate is not None:
                    consumed[(topic, number)] = consumed.get((topic, number), 0.0) + rate
        # (leader, topic) -> [bytes_in, bytes_out, messages_in, every partition known]
        sums: dict[tuple[int, str], list] = {}
        for p in partitions:
            key = (p.topic, p.partition)
            entry = sums.setdefault((p.leader, p.topic), [0.0, 0.0, 0.0, True])
            leader_size = sizes.get(p.leader, {}).get(key)
            end, start = ends.get(key), starts.get(key)
            if leader_size is None or end is None or start is None:
                entry[3] = False
                continue
            messages = self.offsets.update(("end", p.topic, p.partition), end, at_s)
            per_message = leader_size / (end - start) if end > start else 0.0
            previous = self._logs.get((p.leader, p.topic, p.partition))
            self._logs[(p.leader, p.topic, p.partition)] = (leader_size, start, at_s)
            if messages is None:
                entry[3] = False
                continue
            bytes_in = messages * per_message
            if previous is not None and previous[1] == start and leader_size >= previous[0]:
                elapsed = at_s - previous[2]
                if 0 < elapsed <= self.max_gap_s:
                    bytes_in = (leader_size - previous[0]) / elapsed
            if bytes_in > self.max_rate:
                entry[3] = False
                continue
            entry[0] += bytes_in
            entry[2] += messages
            if committed is None:
                entry[1] = None
            elif entry[1] is not None:
                entry[1] += consumed.get(key, 0.0) * per_message
        live = {(p.leader, p.topic, p.partition) for p in partitions}
        for key in [k for k in self._logs if k not in live]:
            del self._logs[key]  # deleted topics, moved leaderships: bounded by the cluster's partitions
        totals: dict[int, list] = {}
        for (leader, topic), (bytes_in, bytes_out, messages, known) in sums.items():
            m = measurements.get(leader)
            total = totals.setdefault(leader, [0.0, 0.0, 0.0, True])
            if m is None or not known:
                total[3] = False
                continue
            m.topic_rate(cc.TOPIC_BYTES_IN, topic, bytes_in)
            m.topic_rate(cc.TOPIC_MESSAGES_IN_PER_SEC, topic, messages)
            total[0] += bytes_in
            total[2] += messages
            if bytes_out is None:
                total[1] = None
            else:
                m.topic_rate(cc.TOPIC_BYTES_OUT, topic, bytes_out)
                if total[1] is not None:
                    total[1] += bytes_out
        for broker, m in measurements.items():
            bytes_in, bytes_out, messages, known = totals.get(broker, [0.0, 0.0, 0.0, True])
            if not known:
                continue
            m.broker_value(cc.ALL_TOPIC_BYTES_IN, bytes_in)
            m.broker_value(cc.ALL_TOPIC_MESSAGES_IN_PER_SEC, messages)
            if bytes_out is not None:
                m.broker_value(cc.ALL_TOPIC_BYTES_OUT, bytes_out)
        self.offsets.forget_older_than(at_s - 2 * self.max_gap_s)
        for broker, reason in failed.items():
            self.failures.add(f"broker {broker}: {reason}")
        return list(measurements.values()), failed
