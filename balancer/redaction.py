"""Which Kafka client options hold secrets, and how their values stay out of logs and error messages.

A key naming a password, secret, token, key, JAAS config or credential (``sasl.password``,
``ssl.key.password``, ``sasl.jaas.config``, ``sasl.oauthbearer.client.secret``...) is secret. Errors
from a client library may quote a value back (a JAAS line, a bad password in a parse error), so error
text is scrubbed of the secret values themselves, not only of the keys.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

SECRET_OPTION = re.compile(r"(password|secret|token|key|jaas|credential)", re.IGNORECASE)


def masked(options: Mapping[str, object]) -> dict[str, object]:
    """``options`` safe to log: the value of every secret key is ``***``."""
    return {k: ("***" if SECRET_OPTION.search(k) else v) for k, v in options.items()}


def secret_values(options: Mapping[str, object]) -> tuple[str, ...]:
    """The non-empty values of ``options``' secret keys."""
    return tuple(str(v) for k, v in options.items() if SECRET_OPTION.search(k) and str(v))


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each of ``secrets`` replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text
