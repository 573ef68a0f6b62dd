"""The consumers section of the config: defaults in conf/balancer.yaml, wrong values named before Spark."""

from __future__ import annotations

import pytest

from balancer.config import ConfigError, load_config


def test_defaults_come_from_balancer_yaml():
    consumers = load_config().consumers
    assert consumers.enabled is False and consumers.balance_threshold == 1.5
    assert (consumers.storm_windows, consumers.storm_min_windows, consumers.min_lag_growth) == (3, 2, 1000)


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("consumers.balance_threshold=1.0", "consumers.balance_threshold"),
        ("consumers.balance_threshold=11", "consumers.balance_threshold"),
        ("consumers.storm_min_windows=4", "must not exceed consumers.storm_windows (3)"),
        ("consumers.groups=[unclosed", "consumers.groups: not a valid regular expression"),
        ("consumers.interval=0 seconds", "consumers.interval: must be longer than 0 seconds"),
        ("consumers.enabled=true", "consumers.cluster must name the monitored cluster"),
        ("consumers.nope=1", "consumers.nope: unknown key"),
    ],
)
def test_a_wrong_value_is_named(override, fragment):
    with pytest.raises(ConfigError) as raised:
        load_config(None, [override])
    assert fragment in str(raised.value)


def test_enabled_with_a_cluster_name_and_dotted_client_options():
    consumers = load_config(
        None, ["consumers.enabled=true", "consumers.cluster=prod", "consumers.options.security.protocol=SSL"]
    ).consumers
    assert consumers.cluster == "prod" and consumers.options == {"security.protocol": "SSL"}
