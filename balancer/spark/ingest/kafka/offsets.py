"""Offsets in Spark's Kafka JSON (``{"topic": {"0": 23}}``), resolved from ``startingOffsets`` /
``endingOffsets``, capped by ``maxOffsetsPerTrigger``, and planned into input partitions; offsets that go
backwards or vanish are data loss (``failOnDataLoss``)."""

from __future__ import annotations

import json
import logging
import math
import os

from pyspark.sql.datasource import InputPartition

from balancer.spark.ingest.kafka.admin import Broker
from balancer.spark.ingest.kafka.options import EARLIEST, LATEST, KafkaDataLossError, KafkaOptions

log = logging.getLogger(__name__)

_MIN_CHUNK = 50_000  # don't split a partition range into chunks smaller than this


class KafkaInputPartition(InputPartition):
    """Offsets ``[start, end)`` of one Kafka partition. Picklable."""

    def __init__(self, topic: str, partition: int, start: int, end: int):
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end

    def __repr__(self) -> str:
        return f"KafkaInputPartition({self.topic}-{self.partition} [{self.start}, {self.end}))"


def offset_json(offsets: dict[tuple[str, int], int]) -> dict:
    out: dict[str, dict[str, int]] = {}
    for (topic, p), o in sorted(offsets.items()):
        out.setdefault(topic, {})[str(p)] = int(o)
    return out


def offset_map(offsets: dict | None) -> dict[tuple[str, int], int]:
    return {(t, int(p)): int(o) for t, parts in (offsets or {}).items() for p, o in parts.items()}


def resolve(spec: str, which: str, broker: Broker, tps, ends) -> dict[tuple[str, int], int]:
    """startingOffsets/endingOffsets → concrete offsets. Partitions not named start at earliest."""
    if spec == "earliest":
        return {tp: ends[tp][0] for tp in tps}
    if spec == "latest":
        return {tp: ends[tp][1] for tp in tps}
    try:
        named = offset_map(json.loads(spec))
    except (ValueError, AttributeError, TypeError) as exc:
        raise ValueError(
            f"option '{which}' must be 'earliest', 'latest' or JSON like "
            f'{{"topic":{{"0":23}}}}, got {spec!r}'
        ) from exc
    out = {}
    for tp in tps:
        o = named.get(tp, EARLIEST)
        out[tp] = ends[tp][0] if o == EARLIEST else ends[tp][1] if o == LATEST else o
    return out


def cap(start: dict, end: dict, limit: int) -> dict:
    """Spread ``limit`` offsets over partitions in proportion to their backlog (largest remainder)."""
    lag = {tp: max(0, end[tp] - start.get(tp, end[tp])) for tp in end}
    total = sum(lag.values())
    if total <= limit:
        return dict(end)
    shares = {tp: limit * n / total for tp, n in lag.items()}
    alloc = {tp: int(s) for tp, s in shares.items()}
    for tp in sorted(shares, key=lambda tp: shares[tp] - alloc[tp], reverse=True)[
        : limit - sum(alloc.values())
    ]:
        alloc[tp] += 1
    return {tp: (start[tp] + alloc[tp] if tp in start and lag[tp] else end[tp]) for tp in end}


def split_ranges(
    ranges: list[tuple[str, int, int, int]], min_partitions: int | None
) -> list[KafkaInputPartition]:
    """One InputPartition per partition range; large ranges split so every core gets work."""
    total = sum(e - s for _, _, s, e in ranges)
    target = min_partitions or 2 * (os.cpu_count() or 2)
    chunk = max(_MIN_CHUNK if not min_partitions else 1, math.ceil(total / max(1, target)))
    out = []
    for topic, p, s, e in ranges:
        pieces = max(1, math.ceil((e - s) / chunk))
        step = math.ceil((e - s) / pieces)
        out.extend(KafkaInputPartition(topic, p, lo, min(e, lo + step)) for lo in range(s, e, step))
    return out


def plan_ranges(broker: Broker, opts: KafkaOptions, start: dict, end: dict) -> list[KafkaInputPartition]:
    """Ranges for a batch; new partitions start at earliest; backwards ranges are data loss."""
    starts, ends = offset_map(start), offset_map(end)
    missing = [tp for tp in ends if tp not in starts]
    backwards = [tp for tp in ends if tp in starts and starts[tp] > ends[tp]]
    lows = (
        {tp: lh[0] for tp, lh in broker.watermarks(missing + backwards).items()}
        if missing or backwards
        else {}
    )
    ranges = []
    for tp, e in sorted(ends.items()):
        s = starts.get(tp)
        if s is None:
            s = min(lows[tp], e)
        elif s > e:
            data_loss(opts, tp, s, e, "the batch end offset is before its start offset")
            s = min(lows[tp], e)
        if e > s:
            ranges.append((tp[0], tp[1], s, e))
    return split_ranges(ranges, opts.min_partitions)


def data_loss(opts: KafkaOptions, tp, expected: int, found, why: str) -> None:
    message = (
        f"Data loss on topic {tp[0]!r} partition {tp[1]}: expected offset {expected}, found {found} "
        f"({why}; the broker lost data, or the topic was deleted/recreated). "
        "Set failOnDataLoss=false to continue from what exists."
    )
    if opts.fail_on_data_loss:
        raise KafkaDataLossError(opts.redact(message))
    log.warning(opts.redact(message))
