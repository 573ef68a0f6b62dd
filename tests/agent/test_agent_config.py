"""agent.* in the job's YAML: defaults, and every wrong value stopped naming its key."""

from __future__ import annotations

import pytest

from balancer.config import ConfigError, load_config


def test_defaults_are_the_zero_install_source_in_cruise_controls_format():
    agent = load_config().agent
    assert (agent.source, agent.format, agent.interval) == ("admin", "cruise-control", "1 minute")


def test_endpoints_by_broker_id_from_set():
    agent = load_config(None, ["agent.source=jmx", "agent.jmx.endpoints.2=http://kafka-2:9404/metrics"]).agent
    assert agent.jmx.endpoints == {2: "http://kafka-2:9404/metrics"}


@pytest.mark.parametrize(
    "overrides, words",
    [
        (["agent.source=jmx"], ["agent:", "agent.jmx.endpoints", "url_template"]),
        (["agent.source=prometheus"], ["agent.source", "'jmx'"]),
        (["agent.format=json"], ["agent.format"]),
        (["agent.interval=0 seconds"], ["agent.interval", "at least 1 second"]),
        (["agent.interval=soon"], ["agent.interval", "not a duration"]),
        (["agent.max_series=0"], ["agent.max_series"]),
        (["agent.jmx.endpoints.1=kafka-1:9404"], ["agent.jmx.endpoints", "http(s)://"]),
        (["agent.jmx.url_template=http://kafka:9404/metrics"], ["agent.jmx.url_template", "{host}"]),
        (["agent.jmx.url_template=http://{host}:{port}/metrics"], ["agent.jmx.url_template"]),
        (["agent.format=v1", "capacity.path=c.json"], ["agent.cluster"]),
        (["agent.format=v1", "agent.cluster=prod"], ["capacity.path"]),
        (["agent.sources=jmx"], ["agent.sources", "unknown key"]),
    ],
)
def test_a_wrong_value_names_its_key(overrides, words):
    with pytest.raises(ConfigError) as caught:
        load_config(None, overrides)
    for word in words:
        assert word in str(caught.value)
