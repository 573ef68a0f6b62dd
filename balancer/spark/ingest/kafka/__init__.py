"""A Kafka source for Spark written with the Python Data Source API (``format("kafka_py")``): a generic
connector that knows Kafka and Spark, and no product's value format. Rule: values stay bytes unless the
caller hands in a ``ValueDecoder``.

Used where Spark's JVM Kafka connector jar is not available. Register it once per session::

    spark.dataSource.register(KafkaSource)  # or KafkaSource.decoding(decoder)
    df = (spark.readStream.format("kafka_py")
          .option("kafka.bootstrap.servers", "host:9092").option("subscribe", "metrics").load())

Output schema is identical to Spark's built-in Kafka source: ``key binary, value binary,
topic string, partition int, offset long, timestamp timestamp, timestampType int``. The class that
``KafkaSource.decoding(decoder)`` returns adds ``decoder.column`` after them: each value decoded in the
reading task, in bulk over the Arrow batch (the product's decoders: ``balancer.spark.ingest.decoders``).

Contract (the same one PySpark's ``datasource.py`` states for every Python source):

* Offsets are plain JSON-serializable dicts in Spark's Kafka format,
  ``{"topic": {"0": 23, "1": 40}}``: for each partition, the next offset to read (exclusive
  end of a batch, inclusive start of the next). Spark's checkpoint owns them; the Kafka
  consumer group never commits.
* :class:`KafkaInputPartition` is a small picklable value (topic, partition, start, end):
  one Kafka partition range, split into chunks when large so every core works.
* ``read()`` is stateless: it opens its own consumer, reads exactly ``[start, end)`` and
  yields pyarrow RecordBatches. It stops exactly at ``end`` and fails (never hangs) if
  records in the range are missing.
* Driver-side state (``latestOffset``/``partitions``/``commit``) lives in one long-lived
  Python process per query; it only caches what can be rebuilt from the broker.

Options (mirroring Spark's Kafka source): ``kafka.bootstrap.servers``, ``subscribe``,
``startingOffsets``, ``endingOffsets`` (batch reads), ``maxOffsetsPerTrigger``,
``failOnDataLoss``, ``kafkaUnavailableTimeoutMs``, ``minPartitions``; any other
``kafka.<prop>`` goes to confluent-kafka as ``<prop>``. Secrets never reach logs or errors.

Limits of PySpark 4.1's Python streaming API (no ReadLimit / admission control, no
SupportsTriggerAvailableNow for Python sources):

* ``maxOffsetsPerTrigger`` is applied inside ``latestOffset()``, from the end of the last
  planned batch (tracked on the driver; Spark re-announces it on restart through
  ``partitions(end, end)``). Under ``trigger(availableNow=True)`` Spark falls back to a single
  batch, so with a cap that run reads just one capped batch; use a processing-time trigger.
* Partitions missing from a ``startingOffsets`` JSON start at earliest (Spark would reject them).
* Data loss is found when offsets go backwards, a partition disappears or the earliest offset
  passes ours. Without leader epochs, a wiped partition that has grown past our offset again
  cannot be detected.

Modules: ``options`` (options, errors, the schema), ``admin`` (driver-side metadata), ``offsets``
(offsets and input partitions), ``source`` (the Data Source and its readers), ``reader`` (the executors'
read path).
"""

from balancer.spark.ingest.kafka.offsets import KafkaInputPartition
from balancer.spark.ingest.kafka.options import (
    SCHEMA,
    KafkaDataLossError,
    KafkaOptions,
    KafkaSourceError,
    KafkaUnavailableError,
)
from balancer.spark.ingest.kafka.reader import ValueDecoder, read_range
from balancer.spark.ingest.kafka.source import KafkaSource

__all__ = [
    "SCHEMA",
    "KafkaDataLossError",
    "KafkaInputPartition",
    "KafkaOptions",
    "KafkaSource",
    "KafkaSourceError",
    "KafkaUnavailableError",
    "ValueDecoder",
    "read_range",
]
