"""Config: a wrong key or value is named with what is allowed, before any Spark session exists."""

from __future__ import annotations

import re

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.config import ConfigError, load_config
from balancer.redaction import masked


def test_defaults_load():
    config = load_config()
    assert config.balancer.balance_threshold == 1.10 and config.balancer.capacity_threshold == 0.8
    assert config.source.connector == "python" and config.lakehouse.engine == "auto"


def test_set_overrides_are_typed():
    config = load_config(
        None,
        [
            "balancer.balance_threshold=1.05",
            "balancer.excluded_brokers=[1, 2]",
            "source.options.security.protocol=SASL_SSL",
        ],
    )
    assert config.balancer.balance_threshold == 1.05
    assert config.balancer.excluded_brokers == [1, 2]
    assert config.source.options == {"security.protocol": "SASL_SSL"}  # client keys keep their dots


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("source.nope=1", "source.nope: unknown key; allowed: bootstrap_servers"),
        ("nope.key=1", "nope: unknown key"),
        ("windows.size=banana", "windows.size"),
        ("balancer.balance_threshold=0.9", "balancer.balance_threshold"),
        ("source.connector=java", "source.connector"),
        ("lakehouse.engine=spark", "lakehouse.engine"),
        ("balancer.excluded_topics=[unclosed", "balancer.excluded_topics"),
        ("balancer.drain_brokers=[-1]", "balancer.drain_brokers"),
        ("balancer.drain_brokers=seven", "balancer.drain_brokers"),
        ("balancer.thresholds.disk.balance=0.9", "balancer.thresholds.disk.balance"),
        (
            "balancer.thresholds.network_in.low_utilization=1.5",
            "balancer.thresholds.network_in.low_utilization",
        ),
        ("balancer.thresholds.leaders.low_utilization=0.3", "balancer.thresholds.leaders"),
        ("balancer.thresholds.cpu.balance=1.2", "balancer.thresholds.cpu: unknown key"),
        ('balancer.goals=["nope"]', "balancer.goals"),
        ("windows.slide=10 minutes", "must not exceed windows.size"),
        ("source.max_rate=0", "source.max_rate"),
        ("source.max_rate=.inf", "source.max_rate"),
        ("source.max_size=-1", "source.max_size"),
        ("source.max_size=.nan", "source.max_size"),
        ("executor.proposal_ttl=soon", "executor.proposal_ttl"),
        ("executor.proposal_ttl=0 minutes", "executor.proposal_ttl: must be longer than 0 seconds"),
        ("executor.deadline=-1 hour", "executor.deadline"),
        ("executor.max_leadership_moves=0", "executor.max_leadership_moves"),
        ("executor.max_partition_moves_per_broker=many", "executor.max_partition_moves_per_broker"),
        ("executor.max_partition_moves=-5", "executor.max_partition_moves"),
        ("executor.throttle=1", "executor.throttle: unknown key; allowed: bootstrap_servers, deadline"),
        ("executor.mode=sometimes", "executor.mode"),
        ("executor.poll_interval=0 seconds", "executor.poll_interval"),
        ("executor.stall_timeout=soon", "executor.stall_timeout"),
        ("balancer.min_plan_interval=later", "balancer.min_plan_interval"),
        ("metadata.source=kafka", "metadata.source 'kafka' is for source.format 'cruise-control'"),
        (
            "lakehouse.retention.log_days=30",
            "lakehouse.retention: log_days (30) must be at least deleted_files",
        ),
    ],
)
def test_bad_key_or_value_names_it(override, fragment):
    with pytest.raises(ConfigError) as error:
        load_config(None, [override])
    assert fragment in str(error.value)


# Flags take YAML's bare true/false; a quoted word or a number is refused naming the key. ("yes" is quoted:
# bare, PyYAML's YAML 1.1 reads it as true before the config sees it.)
@pytest.mark.parametrize(
    "override, key",
    [
        ('balancer.relax="yes"', "balancer.relax"),
        ('balancer.fill_data_first="false"', "balancer.fill_data_first"),
        ("balancer.fill_disk_excess=0", "balancer.fill_disk_excess"),
        ('balancer.counts_first="no"', "balancer.counts_first"),
        ("balancer.swap_data_cap=1", "balancer.swap_data_cap"),
        ("quality.enabled=0", "quality.enabled"),
        ('consumers.enabled="true"', "consumers.enabled"),
    ],
)
def test_a_flag_refuses_anything_but_a_bool(override, key):
    with pytest.raises(ConfigError, match=re.escape(f"{key}: must be true or false, unquoted (got ")):
        load_config(None, [override])


def test_a_flag_in_a_file_refuses_a_string(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text('balancer:\n  fill_data_first: "false"\n')
    with pytest.raises(ConfigError, match=r"balancer\.fill_data_first: .* \(got 'false'\)"):
        load_config(path)


def test_flags_take_true_and_false_from_a_file_and_from_set(tmp_path):
    def flags(config):
        balancer = config.balancer
        return balancer.relax, balancer.swap_data_cap, balancer.fill_data_first, config.quality.enabled

    path = tmp_path / "job.yaml"
    path.write_text("balancer:\n  relax: false\n  swap_data_cap: true\nquality:\n  enabled: false\n")
    assert flags(load_config(path)) == (False, True, None, False)  # a nullable flag keeps its null
    overrides = ["balancer.relax=true", "balancer.swap_data_cap=null", "balancer.fill_data_first=false"]
    assert flags(load_config(path, overrides)) == (True, None, False, False)
    assert load_config(None, ["consumers.enabled=true", "consumers.cluster=prod"]).consumers.enabled is True


def test_physical_limits_default_and_override():
    source = load_config().source
    assert source.max_rate == 1e13 and source.max_size == 1e15  # 10 TB/s, 1 PB
    assert load_config(None, ["source.max_rate=1e12"]).source.max_rate == 1e12


def test_bad_set_syntax():
    with pytest.raises(ConfigError, match=r"expected dotted\.key=value"):
        load_config(None, ["balancer.balance_threshold"])


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20))
# Mappings shaped like the config (its sections, their keys or stray ones), with any scalar or nesting.
CONFIG_LIKE = st.dictionaries(
    st.sampled_from(["windows", "planner", "source", "lakehouse", "executor", "agent", "x"]),
    st.one_of(
        SCALARS,
        st.dictionaries(
            st.one_of(st.text(max_size=12), st.integers()), st.one_of(SCALARS, st.lists(SCALARS))
        ),
    ),
).map(lambda tree: yaml.safe_dump(tree).encode())


@given(st.one_of(st.binary(min_size=1, max_size=300), st.text(max_size=300).map(str.encode), CONFIG_LIKE))
@settings(max_examples=200, deadline=None)
def test_any_bytes_as_a_config_file_load_or_fail_with_one_line_naming_the_file(tmp_path_factory, data):
    """A config file is operator input: whatever bytes it holds, the config loads or ConfigError names
    the file (no traceback of a decoder or the YAML parser)."""
    path = tmp_path_factory.mktemp("fuzz") / "balancer.yaml"
    path.write_bytes(data)
    try:
        load_config(path)
    except ConfigError as exc:
        assert str(path) in str(exc) or str(exc).startswith("invalid configuration")


def test_a_config_file_that_is_not_utf8_or_not_a_file_is_named(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("windows:\n  size: 5 minutes # caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin1\.yaml is not UTF-8 text \(byte \d+\)"):
        load_config(path)
    with pytest.raises(ConfigError, match=r"cannot be read"):
        load_config(tmp_path)  # a folder


def test_secrets_are_redacted():
    shown = masked({"sasl.password": "hunter2", "ssl.key.password": "k", "security.protocol": "SASL_SSL"})
    assert shown == {"sasl.password": "***", "ssl.key.password": "***", "security.protocol": "SASL_SSL"}


def test_executor_defaults_and_override():
    config = load_config()
    executor = config.executor
    assert (executor.proposal_ttl, executor.deadline) == ("30 minutes", "1 hour")
    assert (
        executor.max_leadership_moves,
        executor.max_partition_moves_per_broker,
        executor.max_partition_moves,
    ) == (1000, 5, 1250)  # Cruise Control's executor defaults
    assert config.balancer.min_plan_interval == "10 minutes"
    changed = load_config(None, ["executor.proposal_ttl=5 minutes", "balancer.min_plan_interval=0 seconds"])
    assert changed.executor.proposal_ttl == "5 minutes" and changed.balancer.min_plan_interval == "0 seconds"


def test_durations_are_parsed_once_into_typed_values():
    config = load_config(None, ["windows.watermark=90 seconds", "executor.deadline=2 hours"])
    assert (config.windows.watermark.ms, config.windows.watermark.spark) == (90_000, "90 seconds")
    assert config.executor.deadline.seconds == 7200 and config.executor.deadline == "2 hours"
    assert config.windows.size.ms == 300_000  # a default is typed as well
    assert type(config.trigger.interval.text) is str  # for APIs that refuse a str subclass
