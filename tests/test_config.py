"""Config: a wrong key or value is named with what is allowed, before any Spark session exists."""

from __future__ import annotations

import pytest

from balancer.config import ConfigError, load_config, redact


def test_defaults_load():
    config = load_config()
    assert config.balancer.balance_threshold == 1.10 and config.balancer.capacity_threshold == 0.8
    assert config.source.connector == "python" and config.lakehouse.engine == "auto"


def test_set_overrides_are_typed():
    config = load_config(None, ["balancer.balance_threshold=1.05", "balancer.excluded_brokers=[1, 2]",
                                "source.options.security.protocol=SASL_SSL"])
    assert config.balancer.balance_threshold == 1.05
    assert config.balancer.excluded_brokers == [1, 2]
    assert config.source.options == {"security.protocol": "SASL_SSL"}  # client keys keep their dots


@pytest.mark.parametrize("override, fragment", [
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
    ("balancer.thresholds.network_in.low_utilization=1.5", "balancer.thresholds.network_in.low_utilization"),
    ("balancer.thresholds.leaders.low_utilization=0.3", "balancer.thresholds.leaders"),
    ("balancer.thresholds.cpu.balance=1.2", "balancer.thresholds.cpu: unknown key"),
    ('balancer.goals=["nope"]', "balancer.goals"),
    ("windows.slide=10 minutes", "must not exceed windows.size"),
    ("source.max_rate=0", "source.max_rate"),
    ("source.max_rate=.inf", "source.max_rate"),
    ("source.max_size=-1", "source.max_size"),
    ("source.max_size=.nan", "source.max_size"),
])
def test_bad_key_or_value_names_it(override, fragment):
    with pytest.raises(ConfigError) as error:
        load_config(None, [override])
    assert fragment in str(error.value)


def test_physical_limits_default_and_override():
    source = load_config().source
    assert source.max_rate == 1e13 and source.max_size == 1e15  # 10 TB/s, 1 PB
    assert load_config(None, ["source.max_rate=1e12"]).source.max_rate == 1e12


def test_bad_set_syntax():
    with pytest.raises(ConfigError, match="expected dotted.key=value"):
        load_config(None, ["balancer.balance_threshold"])


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_secrets_are_redacted():
    shown = redact({"sasl.password": "hunter2", "ssl.key.password": "k", "security.protocol": "SASL_SSL"})
    assert shown == {"sasl.password": "***", "ssl.key.password": "***", "security.protocol": "SASL_SSL"}
