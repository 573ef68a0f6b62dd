"""The source's options, parsed and checked once (an error names the option), its errors, and the Kafka
columns it gives. Secrets in ``kafka.*`` options never reach a repr, a log line or an error."""

from __future__ import annotations

import uuid

from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from balancer.redaction import scrub, secret_values

SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)

EARLIEST, LATEST = -2, -1  # Spark's markers inside startingOffsets/endingOffsets JSON


class KafkaSourceError(RuntimeError):
    """Base for errors raised by this source."""


class KafkaDataLossError(KafkaSourceError):
    """Offsets went backwards or vanished while ``failOnDataLoss`` is true."""


class KafkaUnavailableError(KafkaSourceError):
    """The brokers did not answer within ``kafkaUnavailableTimeoutMs``."""


class KafkaOptions:
    """Parsed, validated options. Picklable; secrets stay out of repr/str."""

    def __init__(self, options: dict):
        opts = {str(k).lower(): str(v) for k, v in options.items()}  # Spark passes keys lower-cased
        self.bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
        if not self.bootstrap:
            raise ValueError("option 'kafka.bootstrap.servers' is required")
        self.topics = [t.strip() for t in opts.get("subscribe", "").split(",") if t.strip()]
        if not self.topics:
            raise ValueError("option 'subscribe' is required (one topic or a comma-separated list)")
        self.starting = opts.get("startingoffsets", "latest").strip()
        self.ending = opts.get("endingoffsets", "latest").strip()
        self.max_per_trigger = int(opts["maxoffsetspertrigger"]) if opts.get("maxoffsetspertrigger") else None
        if self.max_per_trigger is not None and self.max_per_trigger <= 0:
            raise ValueError("option 'maxOffsetsPerTrigger' must be positive")
        self.fail_on_data_loss = opts.get("failondataloss", "true").strip().lower() != "false"
        self.unavailable_timeout = int(opts.get("kafkaunavailabletimeoutms", "60000")) / 1000.0
        self.min_partitions = int(opts["minpartitions"]) if opts.get("minpartitions") else None
        # Every other kafka.<prop> goes to librdkafka unchanged.
        self.client = {
            k[len("kafka.") :]: v
            for k, v in opts.items()
            if k.startswith("kafka.") and k != "kafka.bootstrap.servers"
        }
        self.secrets = secret_values(self.client)

    def __repr__(self) -> str:
        return f"KafkaOptions(bootstrap={self.bootstrap!r}, topics={self.topics!r})"

    def redact(self, text: str) -> str:
        return scrub(text, self.secrets)

    def consumer_config(self, **overrides) -> dict:
        config = {
            "bootstrap.servers": self.bootstrap,
            # A throwaway group that never commits: Spark's checkpoint owns offsets.
            "group.id": f"kafka-py-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # Out of range must surface as an error, not a silent jump to earliest/latest.
            "auto.offset.reset": "error",
            # EOF events tell read() and the probe "nothing more exists" without waiting.
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
            "socket.connection.setup.timeout.ms": max(1000, int(self.unavailable_timeout * 1000)),
            "log_level": 3,
        }
        config.update(self.client)
        config.update(overrides)
        return config
