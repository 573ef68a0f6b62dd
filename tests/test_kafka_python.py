"""The one mapping from the YAML's librdkafka-style options to kafka-python's arguments (executor, agent)."""

from __future__ import annotations

import pytest

from balancer.agent.admin import AdminSource
from balancer.execution.executor import ExecutionError
from balancer.execution.kafka_admin import client_options
from balancer.kafka_python import kafka_python_options


def test_sasl_and_ssl_settings_map_and_timeouts_become_integers():
    options = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "balancer",
        "sasl.password": "pw",
        "ssl.ca.location": "/ca.pem",
        "request.timeout.ms": "30000",
    }
    assert kafka_python_options(options, key="x") == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "balancer",
        "sasl_plain_password": "pw",
        "ssl_cafile": "/ca.pem",
        "request_timeout_ms": 30000,
    }


def test_a_setting_without_an_equivalent_is_refused_naming_it_and_the_key():
    with pytest.raises(ValueError, match=r"agent\.options key 'enable\.ssl\.certificate\.verification'"):
        kafka_python_options({"enable.ssl.certificate.verification": "false"}, key="agent.options key")
    with pytest.raises(ExecutionError, match=r"executor\.options key 'socket\.keepalive\.enable'"):
        client_options({"socket.keepalive.enable": "true"})


def test_the_agent_refuses_it_before_connecting():
    with pytest.raises(ValueError, match=r"agent\.options key 'linger\.ms'"):
        AdminSource(
            "127.0.0.1:1",
            {"linger.ms": "5"},
            timeout_s=1,
            max_gap_s=1,
            max_rate=1,
            max_series=1,
            max_groups=1,
        )
