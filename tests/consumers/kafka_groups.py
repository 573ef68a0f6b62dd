"""Real consumer groups for the tests on real Kafka: each member its own confluent-kafka Consumer in its own
thread, and topics made with a client held until they exist."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic


class Member:
    """One consumer of a group, in its own thread: subscribes, consumes, and commits each record it consumed
    (synchronously), or only those below offset ``commit_below`` when given. It polls all along, so it takes
    part in every rebalance (a classic group waits for each member's poll to rejoin)."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], client_id: str, **conf):
        self.commit_below = conf.pop("commit_below", None)
        self.conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": client_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": "false",
            "log_level": 0,
            **conf,
        }
        self.topics = topics
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=client_id, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        consumer = Consumer(self.conf)
        consumer.subscribe(self.topics)
        try:
            while not self._stop.is_set():
                message = consumer.poll(0.2)
                if message is None or message.error():
                    continue
                if self.commit_below is None or message.offset() < self.commit_below:
                    consumer.commit(message=message, asynchronous=False)
        finally:
            consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


@contextmanager
def members(kafka, group: str, topics: list[str], count: int, **conf) -> Iterator[list[Member]]:
    running = [Member(kafka.bootstrap_servers, group, topics, f"{group}-{i}", **conf) for i in range(count)]
    try:
        yield running
    finally:
        for member in running:
            member.stop()


def produce(kafka, topic: str, counts: dict[int, int], size: int) -> None:
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 5})
    for partition, count in counts.items():
        for _ in range(count):
            producer.produce(topic, value=b"x" * size, partition=partition)
    assert producer.flush(30) == 0


def topic(kafka, partitions: int) -> str:
    # Our own client, held until the topic exists: KafkaCluster.create_topic lets its AdminClient go before
    # the futures resolve, and a busy machine then sees them fail with "handle destroyed".
    name = f"cg-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    for future in admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30).values():
        future.result(timeout=60)
    return name
