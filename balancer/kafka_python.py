"""The YAML's librdkafka-style client settings (``*.options``) as kafka-python's arguments.

kafka-python serves the Admin calls confluent-kafka lacks (reassignments, elections, DescribeLogDirs), with
the same settings the operator gave once for the cluster: one mapping for every such client.
"""

from __future__ import annotations

from collections.abc import Mapping

# librdkafka property -> kafka-python client argument.
_NAMES = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "client.id": "client_id",
    "request.timeout.ms": "request_timeout_ms",
}


def kafka_python_options(options: Mapping[str, str], *, key: str) -> dict[str, object]:
    """``options`` as kafka-python arguments (``*_ms`` as integers). ValueError names the config ``key`` and
    the first setting kafka-python has no name for: a setting silently dropped would connect differently."""
    out: dict[str, object] = {}
    for name, value in options.items():
        argument = _NAMES.get(name)
        if argument is None:
            raise ValueError(
                f"{key} {name!r} has no kafka-python equivalent; supported: {', '.join(sorted(_NAMES))}"
            )
        out[argument] = int(value) if argument.endswith("_ms") else value
    return out
