"""Typed job configuration: parsed once from YAML (+ ``--set`` overrides), then injected.

A wrong key or value raises :class:`ConfigError` naming the dotted key and what is
allowed, before any Spark session exists.

One module, over 500 lines, on purpose: every section's dataclass and its validation sit together so
the whole YAML surface an operator writes can be read in one place, in the order of ``conf/``'s files.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, Self

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import CoreSchema, core_schema

from balancer.resources import resource_root
from balancer.vocabulary import SOFT_GOALS, TelemetryFormat

_DURATION = re.compile(
    r"^\s*(\d+(?:\.\d+)?)\s*(ms|millisecond|milliseconds|s|sec|second|seconds|m|min|minute|minutes|h|hour|hours)\s*$"
)
_UNIT_SECONDS = {
    "ms": 0.001,
    "millisecond": 0.001,
    "milliseconds": 0.001,
    "s": 1,
    "sec": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hour": 3600,
    "hours": 3600,
}


class ConfigError(ValueError):
    """A configuration key or value is wrong; the message names the key."""


def duration_seconds(text: str) -> float:
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration like '30 seconds', '5 minutes' or '1 hour'")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


class Duration(str):
    """A duration as the config writes it ("30 seconds"), parsed once when the config is loaded: code
    reads ``seconds`` or ``ms``, never the text. Still the text where printed or compared."""

    seconds: float

    def __new__(cls, text: str) -> Self:
        self = super().__new__(cls, text)
        self.seconds = duration_seconds(text)  # ValueError naming the text; pydantic adds the key
        return self

    @property
    def ms(self) -> int:
        return int(self.seconds * 1000)

    @property
    def text(self) -> str:
        """As written, a plain ``str``: PySpark's ``trigger(processingTime=)`` refuses a subclass."""
        return str.__str__(self)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(cls, core_schema.str_schema())


class SparkInterval(Duration):
    """A duration Spark's ``window()`` takes: at least one second, in whole seconds."""

    def __new__(cls, text: str) -> Self:
        self = super().__new__(cls, text)
        if self.seconds < 1:
            raise ValueError(f"{text!r} is shorter than one second")
        return self

    @property
    def spark(self) -> str:
        return f"{int(self.seconds)} seconds"


def _client_options(value: Any) -> Any:
    # librdkafka takes every property as a string; YAML gives ints and bools.
    if isinstance(value, dict):
        return {str(k): (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in value.items()}
    return value


# Client settings passed on as they are (source/metadata/consumers/executor/agent options, storage options).
ClientOptions = Annotated[dict[str, str], BeforeValidator(_client_options)]


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    return value


Regex = Annotated[str, AfterValidator(_regex)]


class _Strict(BaseModel):
    """A section: unknown keys refused, frozen once loaded.

    Its flags are ``StrictBool``: YAML's true/false (in a file or a ``--set``) are bools already, so a
    string or a number there ("yes", "false", 1) is a typo, refused naming the key rather than read by
    pydantic's lax coercion."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceConfig(_Strict):
    connector: Literal["python", "native"] = "python"
    # v1: our JSON records; cruise-control: the binary records of Cruise Control's metrics reporter
    # (topic __CruiseControlMetrics, or strimzi.cruisecontrol.metrics under Strimzi).
    format: TelemetryFormat = TelemetryFormat.V1
    # The monitored cluster's name. Cruise Control's records carry none, so that format needs it;
    # v1 records name their own cluster and this must then be unset.
    cluster: str | None = None
    bootstrap_servers: str = "127.0.0.1:9092"
    topic: str = "broker-metrics"
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    max_records_per_batch: int = Field(default=1_000_000, gt=0)
    # Passed to the Kafka client unchanged (security.protocol, sasl.*, ssl.*, ...).
    options: ClientOptions = Field(default_factory=dict)
    # How long the source keeps retrying an unreachable broker before failing the query.
    unavailable_timeout: Duration = Duration("60 seconds")
    # Largest accepted telemetry value; bigger ones are quarantined.
    max_value_bytes: int = Field(default=65536, gt=0)
    # Physically impossible figures are quarantined, not landed: a rate (bytes/s; also messages/s, as a
    # message is at least one byte) above max_rate, a size (bytes) above max_size. See conf/balancer.yaml.
    max_rate: float = Field(default=1e13, gt=0, allow_inf_nan=False)
    max_size: float = Field(default=1e15, gt=0, allow_inf_nan=False)

    @field_validator("topic", "bootstrap_servers")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @model_validator(mode="after")
    def _cluster_named(self) -> SourceConfig:
        if self.format == TelemetryFormat.CRUISE_CONTROL and not (self.cluster or "").strip():
            raise ValueError(
                "source.cluster must name the monitored cluster when source.format is "
                "'cruise-control' (its records carry no cluster name)"
            )
        if self.format == TelemetryFormat.V1 and self.cluster is not None:
            raise ValueError(
                "source.cluster is for source.format 'cruise-control'; v1 records name their cluster"
            )
        return self


class MetadataConfig(_Strict):
    """Where replica lists, leaders and racks come from when the telemetry does not carry them."""

    # none: the telemetry carries the topology (v1); file: a snapshot JSON at ``path``;
    # kafka: the monitored cluster's Admin API, polled every ``interval``.
    source: Literal["none", "file", "kafka"] = "none"
    path: str | None = None
    # Defaults to source.bootstrap_servers: the reporter writes its topic to the cluster it measures.
    bootstrap_servers: str | None = None
    options: ClientOptions = Field(default_factory=dict)
    interval: Duration = Duration("1 minute")

    @model_validator(mode="after")
    def _path_given(self) -> MetadataConfig:
        if self.source == "file" and not (self.path or "").strip():
            raise ValueError("metadata.path is required when metadata.source is 'file'")
        return self


class ConsumersConfig(_Strict):
    """Consumer-side balance (balancer.consumers): the monitored cluster's groups, read by the job."""

    enabled: StrictBool = False
    # The name the groups are recorded under: the cluster partition_load names (v1 records name theirs, so
    # a v1 job must say which one its bootstrap servers reach); default source.cluster.
    cluster: str | None = None
    # Default metadata.bootstrap_servers, then source.bootstrap_servers; options as source.options.
    bootstrap_servers: str | None = None
    options: ClientOptions = Field(default_factory=dict)
    groups: Regex | None = None  # regex of the group ids to read; null: every group
    interval: Duration = Duration("1 minute")
    # A group is flagged when its busiest member must consume more than this x the fair share.
    balance_threshold: float = Field(default=1.5, gt=1.0, le=10.0)
    # Rebalance storm: membership changed in storm_min_windows of the group's last storm_windows windows.
    storm_windows: int = Field(default=3, ge=1, le=100)
    storm_min_windows: int = Field(default=2, ge=1, le=100)
    # Lag growth (records per window) that counts as growing when members sit idle.
    min_lag_growth: int = Field(default=1000, ge=1)

    @field_validator("interval")
    @classmethod
    def _positive(cls, value: str) -> str:
        if duration_seconds(value) <= 0:
            raise ValueError("must be longer than 0 seconds")
        return value

    @model_validator(mode="after")
    def _storm_fits(self) -> ConsumersConfig:
        if self.storm_min_windows > self.storm_windows:
            raise ValueError(
                f"consumers.storm_min_windows ({self.storm_min_windows}) must not exceed "
                f"consumers.storm_windows ({self.storm_windows})"
            )
        return self


class CapacityConfig(_Strict):
    # Cruise Control's broker capacity file (capacity.json, capacityJBOD.json or capacityCores.json).
    # A v1 broker record's own capacity wins for that broker.
    path: str | None = None


class RetentionConfig(_Strict):
    # How long every lakehouse table keeps its Delta history, so a plan can be audited against what
    # the job had committed when it made it (time travel, DESCRIBE HISTORY). At least 7 days: Delta's
    # own VACUUM safety floor. VACUUM must never run on these tables with a shorter retention.
    # delta.logRetentionDuration: commits kept in _delta_log (what time travel and history read).
    log_days: int = Field(default=365, ge=7)
    # delta.deletedFileRetentionDuration: files a VACUUM keeps after they left the table.
    deleted_files_days: int = Field(default=365, ge=7)

    @model_validator(mode="after")
    def _log_outlives_files(self) -> RetentionConfig:
        # delta-spark refuses a table whose log is kept for less time than its deleted files.
        if self.log_days < self.deleted_files_days:
            raise ValueError(
                f"log_days ({self.log_days}) must be at least deleted_files_days "
                f"({self.deleted_files_days}): Delta keeps a log as long as its deleted files"
            )
        return self

    def table_properties(self) -> dict[str, str]:
        """The Delta table properties that keep this history (both engines take the same text)."""
        return {
            "delta.logRetentionDuration": f"interval {self.log_days} days",
            "delta.deletedFileRetentionDuration": f"interval {self.deleted_files_days} days",
        }


class CompactionConfig(_Strict):
    # Every micro-batch adds a small file to each table it writes, and every reader (each window close
    # included) lists them all: the job compacts every table's small files into big ones this often,
    # between micro-batches, and writes a Delta checkpoint so the log is not replayed from the start.
    # Compaction only rewrites files (dataChange=false) and deletes nothing: every version stays
    # readable (balancer sql --as-of, balancer history). "0 seconds": never.
    interval: Duration = Duration("1 hour")


class LakehouseConfig(_Strict):
    # A local folder, or s3://bucket/prefix (s3a:// too) with storage_options.
    path: str = "data/lakehouse"
    engine: Literal["auto", "delta-rs", "delta-spark"] = "auto"
    retention: RetentionConfig = RetentionConfig()
    compaction: CompactionConfig = CompactionConfig()
    # delta-rs' (object_store's) storage options, e.g. AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
    # AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ALLOW_HTTP, aws_conditional_put; also given to the executors'
    # parquet writes and, on delta-spark, as Hadoop fs.s3a.* settings (balancer/storage.py).
    storage_options: ClientOptions = Field(default_factory=dict, repr=False)  # repr: holds credentials

    @model_validator(mode="after")
    def _path_usable(self) -> LakehouseConfig:
        # A section-level rule: its error never echoes the input, which may hold credentials.
        from balancer.storage import Storage, is_uri

        if is_uri(self.path):
            Storage.of(self.path, self.storage_options)
        return self


class CheckpointConfig(_Strict):
    path: str = "data/checkpoints"


class WindowsConfig(_Strict):
    size: SparkInterval = SparkInterval("5 minutes")
    # Tumbling by default: a window is aggregated from the landed telemetry when it closes, so a
    # slide of size/k reads every report k times (there are no per-slide panes yet).
    slide: SparkInterval = SparkInterval("5 minutes")
    watermark: SparkInterval = SparkInterval("2 minutes")

    @model_validator(mode="after")
    def _slide_fits(self) -> WindowsConfig:
        if self.slide.seconds > self.size.seconds:
            raise ValueError(f"windows.slide ({self.slide}) must not exceed windows.size ({self.size})")
        return self


class TriggerConfig(_Strict):
    interval: Duration = Duration("10 seconds")


class ResourceThreshold(_Strict):
    """One resource's balance threshold and the cluster utilization below which it is not balanced."""

    balance: float | None = Field(default=None, gt=1.0, le=10.0)  # None: balancer.balance_threshold
    low_utilization: float | None = Field(default=None, ge=0.0, le=1.0)  # None: the planner's default


class ThresholdsConfig(_Strict):
    network_in: ResourceThreshold = Field(default_factory=ResourceThreshold)
    network_out: ResourceThreshold = Field(default_factory=ResourceThreshold)
    disk: ResourceThreshold = Field(default_factory=ResourceThreshold)
    leaders: ResourceThreshold = Field(default_factory=ResourceThreshold)
    replicas: ResourceThreshold = Field(default_factory=ResourceThreshold)

    @field_validator("leaders", "replicas")
    @classmethod
    def _counts(cls, value: ResourceThreshold) -> ResourceThreshold:
        if value.low_utilization not in (None, 0.0):
            raise ValueError("low_utilization must be 0: counts have no capacity to be utilized")
        return value


class BalancerConfig(_Strict):
    balance_threshold: float = Field(default=1.10, gt=1.0, le=10.0)
    capacity_threshold: float = Field(default=0.8, gt=0.0, le=1.0)
    max_bytes_to_move: int | None = Field(default=None, gt=0)
    max_moves_per_broker: int | None = Field(default=None, gt=0)
    # Where traffic is balanced data first: how much more data than the least each shed may copy
    # for fewer replica moves (PlannerOptions.data_slack); null: the planner's default.
    data_slack: float | None = Field(default=None, ge=0.0, le=1.0)
    # Plan a second time from the least-data placement of a linear program and keep the plan that
    # copies less without leaving a goal worse (PlannerOptions.relax); false: the goals' search alone.
    relax: StrictBool = True
    # Hold a traffic goal's swaps to twice the bytes plain moves of the same relief copy
    # (PlannerOptions.swap_data_cap): true always, false never; null: plan both ways where the first
    # made a swap over that cap, and keep the plan that copies less without leaving a goal worse.
    swap_data_cap: StrictBool | None = None
    # Where the disk goal has work, fill a broker with a traffic goal's replicas data first rather
    # than in few big moves (PlannerOptions.fill_data_first): true always where that copies less,
    # false never; null: plan both ways where the first plan's fill could have copied less, and keep
    # the plan that copies less without leaving a goal worse.
    fill_data_first: StrictBool | None = None
    # Where the disk goal has work, fill a broker with a traffic goal's replicas off the brokers over
    # the disk goal's line first, each up to its excess (PlannerOptions.fill_disk_excess): true
    # always, false never; null: plan both ways where the first plan filled brokers while disks stood
    # over the line, and keep the plan that copies less without leaving a goal worse.
    fill_disk_excess: StrictBool | None = None
    # Run the replica count goal before the traffic and disk goals (PlannerOptions.counts_first):
    # true always, false never; null: plan both ways where the first plan leaves the replica count
    # outside its band, and keep the better plan (goals before data).
    counts_first: StrictBool | None = None
    excluded_topics: Regex | None = None
    excluded_brokers: list[int] = Field(default_factory=list)
    # Brokers to empty (decommission): every replica and leadership leaves them, none comes back.
    drain_brokers: list[int] = Field(default_factory=list)
    # Per resource: balance threshold and low-utilization threshold (see conf/balancer.yaml).
    thresholds: ThresholdsConfig = Field(default_factory=ThresholdsConfig)
    # Soft goals to run, in priority order; null: all of them in the planner's default order.
    goals: list[str] | None = None
    # Replica moves are throttled by the operator's executor at this rate (bytes/s); recorded in plans.
    throttle_bytes_per_sec: int = Field(default=50_000_000, gt=0)
    # After a plan completed (or the cluster diverged from it), no new plan for a window ending
    # sooner than this after the window that saw it: the next plan must see post-move telemetry.
    min_plan_interval: Duration = Duration("10 minutes")

    @field_validator("goals")
    @classmethod
    def _goal_names(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            unknown = [g for g in value if g not in SOFT_GOALS]
            if unknown or len(set(value)) != len(value):
                raise ValueError(f"must list distinct soft goals from {', '.join(SOFT_GOALS)}; got {value}")
        return value

    @field_validator("drain_brokers")
    @classmethod
    def _broker_ids(cls, value: list[int]) -> list[int]:
        bad = [b for b in value if b < 0]
        if bad:
            raise ValueError(f"broker ids must be >= 0, got {bad}")
        return value


class ExecutorConfig(_Strict):
    """How plans are carried out and how long an open plan holds the cluster (see balancer.execution)."""

    # A proposed plan with no action observed, or an executing one with no progress, for this long
    # is closed (expired, or superseded by the next plan) and no longer blocks a new one.
    proposal_ttl: Duration = Duration("30 minutes")
    # How long the whole plan should take; batch throttles are computed to meet it.
    deadline: Duration = Duration("1 hour")
    # Cruise Control's executor defaults.
    max_leadership_moves: int = Field(default=1000, gt=0)
    max_partition_moves_per_broker: int = Field(default=5, gt=0)
    max_partition_moves: int = Field(default=1250, gt=0)
    # manual: an operator runs `balancer execute PLAN_ID` (or the exported run.sh); auto: the streaming
    # job starts `balancer execute` itself for each plan it proposes.
    mode: Literal["manual", "auto"] = "manual"
    # The cluster `balancer execute` changes; default metadata.bootstrap_servers, then source's.
    bootstrap_servers: str | None = None
    # Client settings for it (security.protocol, sasl.*, ssl.*); default metadata.options, then source's.
    options: ClientOptions = Field(default_factory=dict)
    # Between ListPartitionReassignments polls of a running batch.
    poll_interval: Duration = Duration("2 seconds")
    # A batch in which no added replica grows and no partition finishes for this long has stalled.
    stall_timeout: Duration = Duration("2 minutes")

    @field_validator("proposal_ttl", "deadline", "poll_interval", "stall_timeout")
    @classmethod
    def _positive(cls, value: Duration) -> Duration:
        if value.seconds <= 0:
            raise ValueError("must be longer than 0 seconds")
        return value

    def cluster(self, config: Config) -> tuple[str, dict[str, str]]:
        """The bootstrap servers and client options of the cluster plans are carried out on."""
        metadata, source = config.metadata, config.source
        servers = self.bootstrap_servers or metadata.bootstrap_servers or source.bootstrap_servers
        if self.bootstrap_servers:
            return servers, dict(self.options)
        return servers, dict(self.options or metadata.options or source.options)


class QualityConfig(_Strict):
    enabled: StrictBool = True
    # A window whose share of quarantined records exceeds this is not planned.
    max_quarantine_share: float = Field(default=0.05, ge=0.0, le=1.0)
    # Every broker must report at least this share of the window's intervals.
    min_broker_coverage: float = Field(default=0.5, ge=0.0, le=1.0)
    # Freshness: each broker's latest report in a window is at most this old at the window's end.
    max_report_age: Duration = Duration("2 minutes")


class SparkConfig(_Strict):
    master: str = "local[*]"
    app_name: str = "kafka-traffic-balancer"
    conf: dict[str, str] = Field(default_factory=dict)

    @field_validator("conf", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): str(v) for k, v in value.items()}
        return value


class AgentJmxConfig(_Strict):
    """Where each broker's Prometheus JMX exporter answers (agent.source: jmx)."""

    # Broker id -> its endpoint URL, e.g. {1: "http://kafka-1:9404/metrics"}.
    endpoints: dict[int, str] = Field(default_factory=dict)
    # Or one URL for every broker the cluster's metadata lists: {host} is the broker's advertised host,
    # {broker} its id (MSK open monitoring: "http://{host}:11001/metrics").
    url_template: str | None = None
    timeout: Duration = Duration("5 seconds")
    # A larger body is not read (a scrape of the standard Kafka rules is tens of kB per thousand partitions).
    max_response_bytes: int = Field(default=64 * 1024 * 1024, gt=0)

    @field_validator("endpoints")
    @classmethod
    def _urls(cls, value: dict[int, str]) -> dict[int, str]:
        for broker, url in value.items():
            if broker < 0:
                raise ValueError(f"broker ids must be >= 0, got {broker}")
            if not re.match(r"^https?://[^/\s]+", url):
                raise ValueError(f"broker {broker}: expected an http(s):// URL, got {url!r}")
        return value

    @field_validator("url_template")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is not None:
            if not re.match(r"^https?://", value) or not ("{host}" in value or "{broker}" in value):
                raise ValueError("expected an http(s):// URL naming {host} or {broker}")
            try:
                value.format(host="h", broker=1)
            except (KeyError, IndexError, ValueError) as exc:
                raise ValueError(f"only {{host}} and {{broker}} may be named ({exc})") from None
        return value


class AgentConfig(_Strict):
    """``balancer agent``: measures the cluster and publishes to source.topic on source.bootstrap_servers."""

    # jmx: each broker's Prometheus JMX exporter (agent.jmx); admin: the Admin API alone, nothing installed.
    source: Literal["jmx", "admin"] = "admin"
    # cruise-control: the reporter's binary records (what source.format cruise-control and Cruise Control
    # itself read); v1: our JSON records (needs agent.cluster and capacity.path).
    format: Literal["cruise-control", "v1"] = "cruise-control"
    # The cluster name v1 records carry (Cruise Control's records carry none).
    cluster: str | None = None
    interval: Duration = Duration("1 minute")
    # The measured cluster (default: metadata.bootstrap_servers, then source.bootstrap_servers) and its
    # client options (default: metadata.options, then source.options).
    bootstrap_servers: str | None = None
    options: ClientOptions = Field(default_factory=dict)
    # Counters kept between intervals, at most (bounded memory; the least recently read go first).
    max_series: int = Field(default=500_000, gt=0)
    # Consumer groups whose committed offsets estimate consumer fetch (admin source), at most.
    max_consumer_groups: int = Field(default=200, ge=0)
    jmx: AgentJmxConfig = Field(default_factory=AgentJmxConfig)

    @field_validator("interval")
    @classmethod
    def _positive(cls, value: str) -> str:
        if duration_seconds(value) < 1:
            raise ValueError("must be at least 1 second")
        return value

    @model_validator(mode="after")
    def _complete(self) -> AgentConfig:
        if self.source == "jmx" and not self.jmx.endpoints and self.jmx.url_template is None:
            raise ValueError("agent.source 'jmx' needs agent.jmx.endpoints or agent.jmx.url_template")
        if self.format == "v1" and not (self.cluster or "").strip():
            raise ValueError("agent.format 'v1' needs agent.cluster (v1 records name their cluster)")
        return self


class Config(_Strict):
    source: SourceConfig = SourceConfig()
    metadata: MetadataConfig = MetadataConfig()
    capacity: CapacityConfig = CapacityConfig()
    lakehouse: LakehouseConfig = LakehouseConfig()
    checkpoint: CheckpointConfig = CheckpointConfig()
    windows: WindowsConfig = WindowsConfig()
    trigger: TriggerConfig = TriggerConfig()
    balancer: BalancerConfig = BalancerConfig()
    executor: ExecutorConfig = ExecutorConfig()
    quality: QualityConfig = QualityConfig()
    spark: SparkConfig = SparkConfig()
    consumers: ConsumersConfig = ConsumersConfig()
    agent: AgentConfig = AgentConfig()

    @model_validator(mode="after")
    def _agent_capacity(self) -> Config:
        if self.agent.format == "v1" and not self.capacity.path:
            raise ValueError("agent.format 'v1' needs capacity.path: v1 broker records carry capacities")
        return self

    @model_validator(mode="after")
    def _consumers_named(self) -> Config:
        if self.consumers.enabled and not (self.consumers.cluster or self.source.cluster or "").strip():
            raise ValueError(
                "consumers.cluster must name the monitored cluster (as its telemetry names it) when "
                "consumers.enabled is true and source.cluster is unset"
            )
        return self

    @model_validator(mode="after")
    def _topology_known(self) -> Config:
        if self.source.format == TelemetryFormat.CRUISE_CONTROL and self.metadata.source == "none":
            raise ValueError(
                "source.format 'cruise-control' needs metadata.source 'file' or 'kafka': Cruise "
                "Control's records carry no replica lists or leaders"
            )
        if self.metadata.source == "kafka" and self.source.format == TelemetryFormat.V1:
            raise ValueError(
                "metadata.source 'kafka' is for source.format 'cruise-control' (whose source.cluster names "
                "the polled cluster); v1 records carry their own replicas, leaders and cluster name"
            )
        return self


REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = resource_root() / "conf" / "balancer.yaml"


def _deep_merge(base: dict, override: dict) -> dict:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


# Sections whose keys are client properties that contain dots themselves (security.protocol, spark.sql.x).
_MAP_SECTIONS = (
    ("source", "options"),
    ("metadata", "options"),
    ("agent", "options"),
    ("consumers", "options"),
    ("spark", "conf"),
)


def _parse_value(raw: str):
    """YAML typing for --set values (ints, floats, bools, lists); anything else stays text."""
    if not raw.strip():
        return ""
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def _apply_override(tree: dict, assignment: str) -> None:
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment!r}: expected dotted.key=value")
    dotted, raw = assignment.split("=", 1)
    parts = dotted.strip().split(".")
    if not all(parts):
        raise ConfigError(f"--set {assignment!r}: {dotted!r} is not a dotted key")
    if tuple(parts[:2]) in _MAP_SECTIONS and len(parts) > 2:
        parts = parts[:2] + [".".join(parts[2:])]
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--set {assignment!r}: {part!r} is a value, not a section")
        node = child
    node[parts[-1]] = _parse_value(raw)


def _format_errors(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        key = ".".join(str(p) for p in error["loc"]) or "(root)"
        if error["type"] == "extra_forbidden":
            section = ".".join(str(p) for p in error["loc"][:-1])
            lines.append(f"  {key}: unknown key{_allowed_keys(section)}")
        else:
            # A section's own rule gets the whole section as input: not echoed (it may hold secrets).
            got = error.get("input")
            shown = "" if isinstance(got, dict) else f" (got {got!r})"
            # A flag refuses a quoted 'false' as well as 'yes': the fix is the bare YAML word, which
            # pydantic's "a valid boolean" does not say.
            message = "must be true or false, unquoted" if error["type"] == "bool_type" else error["msg"]
            lines.append(f"  {key}: {message.removeprefix('Value error, ')}{shown}")
    return "invalid configuration:\n" + "\n".join(lines)


def _allowed_keys(section: str) -> str:
    model: type[BaseModel] = Config
    for part in [p for p in section.split(".") if p]:
        field = model.model_fields.get(part)
        if (
            field is None
            or not isinstance(field.annotation, type)
            or not issubclass(field.annotation, BaseModel)
        ):
            return ""
        model = field.annotation
    return "; allowed: " + ", ".join(sorted(model.model_fields))


def _read_yaml(path) -> dict:
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except OSError as exc:  # a folder, no permission: named, as a missing file is
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:  # YAML is text: bytes that are not UTF-8 are no config
        raise ConfigError(f"config file {path} is not UTF-8 text (byte {exc.start})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    return loaded


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Defaults from conf/balancer.yaml, then ``path`` on top, then each ``--set`` override."""
    tree = _read_yaml(DEFAULT_CONFIG) if DEFAULT_CONFIG.exists() else {}
    if path is not None and str(Path(path).resolve()) != str(DEFAULT_CONFIG):
        tree = _deep_merge(tree, _read_yaml(Path(path)))
    for assignment in overrides:
        _apply_override(tree, assignment)
    try:
        return Config.model_validate(tree)
    except ValidationError as exc:
        raise ConfigError(_format_errors(exc)) from None
