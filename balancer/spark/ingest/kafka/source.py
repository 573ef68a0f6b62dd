"""The Python Data Source (Spark's ``DataSource`` API): the stream and batch readers on the driver, and
``KafkaSource``, the format Spark registers. What the readers plan runs in ``reader.read_range``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import ClassVar

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructField, StructType

from balancer.spark.ingest.kafka.admin import Broker
from balancer.spark.ingest.kafka.offsets import (
    KafkaInputPartition,
    cap,
    data_loss,
    offset_json,
    offset_map,
    plan_ranges,
    resolve,
)
from balancer.spark.ingest.kafka.options import SCHEMA, KafkaOptions
from balancer.spark.ingest.kafka.reader import ValueDecoder, read_range


class KafkaStreamReader(DataSourceStreamReader):
    def __init__(self, options: dict, decoder: ValueDecoder | None = None):
        self.opts = KafkaOptions(options)
        self.decoder = decoder
        self._broker: Broker | None = None
        self._current: dict[tuple[str, int], int] | None = None  # start of the next batch

    @property
    def broker(self) -> Broker:
        if self._broker is None:
            self._broker = Broker(self.opts)
        return self._broker

    def __getstate__(self):  # ship options and decoder only; the driver's consumer stays on the driver
        return {"opts": self.opts, "decoder": self.decoder, "_broker": None, "_current": None}

    def initialOffset(self) -> dict:
        tps = self.broker.partitions()
        ends = self.broker.end_offsets(tps)
        self._current = resolve(self.opts.starting, "startingOffsets", self.broker, tps, ends)
        return offset_json(self._current)

    def latestOffset(self) -> dict:
        tps = self.broker.partitions()
        ends = self.broker.end_offsets(tps)
        current = self._current
        if current is None:  # restart: Spark normally tells us via partitions(); be safe
            current = {}
        latest = {tp: end for tp, (_, end) in ends.items()}
        for tp, at in current.items():
            if tp not in ends:
                data_loss(self.opts, tp, at, "no such partition", "the partition disappeared")
            elif ends[tp][1] < at:
                data_loss(self.opts, tp, at, f"latest offset {ends[tp][1]}", "offsets went backwards")
            elif ends[tp][0] > at:
                data_loss(
                    self.opts,
                    tp,
                    at,
                    f"earliest offset {ends[tp][0]}",
                    "records were deleted before they were read",
                )
        start = {
            tp: (current[tp] if tp in current and current[tp] <= latest[tp] else ends[tp][0]) for tp in latest
        }
        if self.opts.max_per_trigger:
            latest = cap(start, latest, self.opts.max_per_trigger)
        # Spark uses the returned offset as the next batch's start.
        self._current = dict(latest)
        return offset_json(latest)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        # Also called with start == end on restart (setLatestSeenOffset): remember where we are.
        self._current = offset_map(end)
        return plan_ranges(self.broker, self.opts, start, end)

    def read(self, partition: KafkaInputPartition) -> Iterator:
        return read_range(self.opts, partition, self.decoder)

    def commit(self, end: dict) -> None:
        pass  # Spark's checkpoint owns offsets; nothing to commit to Kafka.

    def stop(self) -> None:
        if self._broker is not None:
            self._broker.close()


class KafkaBatchReader(DataSourceReader):
    def __init__(self, options: dict, decoder: ValueDecoder | None = None):
        self.opts = KafkaOptions(options)
        self.decoder = decoder
        broker = Broker(self.opts)
        try:
            tps = broker.partitions()
            ends = broker.end_offsets(tps)
            starting = self.opts.starting if "startingoffsets" in {k.lower() for k in options} else "earliest"
            self._start = resolve(starting, "startingOffsets", broker, tps, ends)
            self._end = resolve(self.opts.ending, "endingOffsets", broker, tps, ends)
            self._parts = plan_ranges(broker, self.opts, offset_json(self._start), offset_json(self._end))
        finally:
            broker.close()

    def partitions(self) -> Sequence[InputPartition]:
        return self._parts

    def read(self, partition: KafkaInputPartition) -> Iterator:
        return read_range(self.opts, partition, self.decoder)


class KafkaSource(DataSource):
    """``format("kafka_py")``: Spark's Kafka source schema and options, on confluent-kafka. The values stay
    bytes; ``KafkaSource.decoding(decoder)`` is the same source with one more column, decoded from each
    value by ``decoder`` in the reading task."""

    decoder: ClassVar[ValueDecoder | None] = None

    @classmethod
    def name(cls) -> str:
        return "kafka_py"

    @classmethod
    def decoding(cls, decoder: ValueDecoder) -> type[KafkaSource]:
        """This source with ``decoder``'s column after Spark's Kafka columns, as the format
        ``kafka_py_<column>``. Register the class it returns (``spark.dataSource.register``) and read its
        ``name()``; Spark pickles it, decoder included, to the reading tasks."""
        for attribute in ("column", "spark_type", "arrow_type", "decode"):
            if not hasattr(decoder, attribute):
                raise TypeError(f"decoder must be a ValueDecoder (it lacks {attribute!r}), got {decoder!r}")
        if decoder.column in SCHEMA.names:
            raise ValueError(f"decoder.column must not be one of Kafka's columns, got {decoder.column!r}")
        name = f"{cls.name()}_{decoder.column}"
        return type(
            f"{cls.__name__}[{decoder.column}]",
            (cls,),
            {"decoder": decoder, "name": classmethod(lambda _cls: name)},
        )

    def schema(self) -> StructType:
        KafkaOptions(dict(self.options))  # a bad option fails here, before the query starts
        if self.decoder is None:
            return SCHEMA
        return StructType(SCHEMA.fields + [StructField(self.decoder.column, self.decoder.spark_type)])

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(dict(self.options), self.decoder)

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(dict(self.options), self.decoder)
