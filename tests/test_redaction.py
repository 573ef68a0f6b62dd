"""Secrets in client options stay out of logs and errors (``balancer.redaction``), through each path
that reads a cluster with the operator's options."""

import pytest

from balancer.consumers.admin import ConsumerPollError, poll_groups
from balancer.redaction import masked, scrub, secret_values

OPTIONS = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "balancer",
    "sasl.password": "hunter2",
    "ssl.key.password": "k-pass",
    "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required password="j-pw";',
    "sasl.oauthbearer.client.secret": "",
}


def test_secret_keys_are_masked_and_the_rest_shown():
    shown = masked(OPTIONS)
    assert {k for k, v in shown.items() if v == "***"} == {
        "sasl.password",
        "ssl.key.password",
        "sasl.jaas.config",
        "sasl.oauthbearer.client.secret",
    }
    assert shown["sasl.username"] == "balancer" and shown["security.protocol"] == "SASL_SSL"


def test_error_text_is_scrubbed_of_every_secret_value():
    secrets = secret_values(OPTIONS)
    assert "" not in secrets and "balancer" not in secrets
    text = scrub(f"auth failed for balancer with hunter2 and k-pass ({OPTIONS['sasl.jaas.config']})", secrets)
    assert "hunter2" not in text and "k-pass" not in text and "j-pw" not in text
    assert "balancer" in text and text.count("***") == 3


def test_consumer_group_poll_errors_never_show_secrets():
    with pytest.raises(ConsumerPollError) as caught:
        poll_groups(
            "127.0.0.1:1", {"security.protocol": "hunter2", "sasl.password": "hunter2"}, "c", timeout_s=2
        )
    assert "hunter2" not in str(caught.value) and "***" in str(caught.value)
