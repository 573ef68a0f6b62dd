"""Driver-side metadata: the subscribed topics' partitions, their watermarks and true end offsets, through
one long-lived consumer that retries with backoff until ``kafkaUnavailableTimeoutMs``."""

from __future__ import annotations

import time

from balancer.spark.ingest.kafka.options import KafkaOptions, KafkaSourceError, KafkaUnavailableError


class Broker:
    """Driver-side metadata access: partitions, watermarks, true end offsets. Retries with backoff."""

    def __init__(self, opts: KafkaOptions):
        self.opts = opts
        self._consumer = None
        # (topic, partition) -> (high watermark, true end) from the last probe.
        self._probed: dict[tuple[str, int], tuple[int, int]] = {}
        self._auth_error = None

    def _on_error(self, error) -> None:
        # librdkafka reports a refused login only through this callback; calls merely time out.
        from confluent_kafka import KafkaError

        if error.code() == KafkaError._AUTHENTICATION:
            self._auth_error = error

    def consumer(self):
        if self._consumer is None:
            from confluent_kafka import Consumer, KafkaException

            try:
                self._consumer = Consumer({**self.opts.consumer_config(), "error_cb": self._on_error})
            except KafkaException as exc:  # a bad client property: retrying cannot help
                raise KafkaSourceError(
                    self.opts.redact(f"Kafka client options for {self.opts.bootstrap} are invalid: {exc}")
                ) from None
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close()
            except Exception:  # closing a consumer of a dead broker may fail; nothing to keep
                pass
            self._consumer = None

    def retry(self, what: str, fn):
        """Call ``fn(timeout)`` until it succeeds or kafkaUnavailableTimeoutMs has passed."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + self.opts.unavailable_timeout
        delay, last = 0.1, None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                return fn(max(0.2, min(remaining, 10.0)))
            except KafkaException as exc:
                last = exc
                if self._consumer is not None:
                    self._consumer.poll(0)  # serves error_cb, which is how a refused login shows up
            if self._auth_error is not None:
                raise KafkaSourceError(
                    self.opts.redact(
                        f"authentication to Kafka brokers {self.opts.bootstrap} failed while {what}: "
                        f"{self._auth_error.str()} (check sasl.* in source.options)"
                    )
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 2.0)
        raise KafkaUnavailableError(
            self.opts.redact(
                f"Kafka brokers {self.opts.bootstrap} unavailable for {self.opts.unavailable_timeout:g}s "
                f"(kafkaUnavailableTimeoutMs) while {what}: {last}"
            )
        )

    def partitions(self) -> list[tuple[str, int]]:
        from confluent_kafka import KafkaError

        def fetch(timeout):
            metadata = self.consumer().list_topics(timeout=timeout)
            if not metadata.brokers:
                from confluent_kafka import KafkaException

                raise KafkaException(KafkaError(KafkaError._TRANSPORT, "no brokers in metadata"))
            return metadata

        metadata = self.retry("listing topics", fetch)
        found = []
        for topic in self.opts.topics:
            meta = metadata.topics.get(topic)
            if meta is None or meta.error is not None:
                continue  # absent topic: no partitions (yet)
            found.extend((topic, p) for p in sorted(meta.partitions))
        return found

    def watermarks(self, tps) -> dict[tuple[str, int], tuple[int, int]]:
        from confluent_kafka import TopicPartition

        out = {}
        for topic, p in tps:
            out[(topic, p)] = self.retry(
                f"reading offsets of {topic}-{p}",
                lambda t, topic=topic, p=p: self.consumer().get_watermark_offsets(
                    TopicPartition(topic, p), timeout=t, cached=False
                ),
            )
        return out

    def end_offsets(self, tps) -> dict[tuple[str, int], tuple[int, int]]:
        """(low, true end) per partition.

        Some brokers (our embedded one) report the high watermark as the base offset of
        the last record batch + 1. Fetching from HW-1 returns the whole last batch and an
        EOF event at the real end; on real Kafka it returns the single record HW-1.
        """
        marks = self.watermarks(tps)
        to_probe = {}
        result = {}
        for tp, (low, high) in marks.items():
            cached = self._probed.get(tp)
            if high <= low:
                result[tp] = (low, high)
            elif cached is not None and cached[0] == high and cached[1] == high:
                result[tp] = (low, high)  # well-behaved broker and nothing new: no probe
            else:
                to_probe[tp] = (low, high)
        if to_probe:
            ends = self._probe({tp: high - 1 for tp, (_, high) in to_probe.items()})
            for tp, (low, high) in to_probe.items():
                end = max(high, ends.get(tp, high))
                if tp in ends:
                    self._probed[tp] = (high, end)
                result[tp] = (low, end)
        return result

    def _probe(self, starts: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        from confluent_kafka import KafkaError, TopicPartition

        consumer = self.consumer()
        consumer.assign([TopicPartition(t, p, o) for (t, p), o in starts.items()])
        ends: dict[tuple[str, int], int] = {}
        done: set = set()
        deadline = time.monotonic() + min(self.opts.unavailable_timeout, 10.0)
        try:
            while len(done) < len(starts) and time.monotonic() < deadline:
                msg = consumer.poll(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
                if msg is None:
                    continue
                tp = (msg.topic(), msg.partition())
                err = msg.error()
                if err is None:
                    ends[tp] = max(ends.get(tp, 0), msg.offset() + 1)
                elif err.code() == KafkaError._PARTITION_EOF:
                    ends[tp] = max(ends.get(tp, 0), msg.offset())
                    done.add(tp)
                elif tp in starts:
                    done.add(tp)  # e.g. out of range: fall back to the watermark
        finally:
            consumer.unassign()
        # Without EOF the partial result is still a lower bound made of offsets that exist.
        return ends
