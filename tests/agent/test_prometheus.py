"""The exposition text parser: samples as exporters write them; anything else counted, never guessed at."""

from __future__ import annotations

import math

import pytest

from balancer.agent.prometheus import parse


def test_samples_with_labels_escapes_and_timestamps():
    text = (
        "# HELP kafka_log_log_size Size\n"
        "# TYPE kafka_log_log_size gauge\n"
        'kafka_log_log_size{partition="0",topic="orders.v2"} 101057.0\n'
        'kafka_server_BrokerTopicMetrics_Count{name="BytesInPerSec",topic="a\\"b\\\\c",} 12 1790000000000\n'
        "process_cpu_seconds_total 3.16\n"
        "up NaN\n"
    )
    parsed = parse(text)
    assert parsed.bad_lines == 0
    first, second, third, fourth = parsed.samples
    assert (first.name, first.labels, first.value) == (
        "kafka_log_log_size",
        {"partition": "0", "topic": "orders.v2"},
        101057.0,
    )
    assert second.labels == {"name": "BytesInPerSec", "topic": 'a"b\\c'} and second.value == 12.0
    assert third.labels == {} and third.value == 3.16
    assert math.isnan(fourth.value)


@pytest.mark.parametrize(
    "line",
    [
        "<html><body>502 Bad Gateway</body></html>",
        "kafka_log_log_size{topic=orders} 1",  # unquoted label value
        'kafka_log_log_size{topic="orders" 1',  # unclosed braces
        "kafka_log_log_size one",
        "kafka_log_log_size 1 2 3",
        "\x00\x01\x02\ufffd\ufffd",
        'x{a="1",a="2"} 1',  # a label twice
    ],
)
def test_a_line_that_is_not_a_sample_is_counted(line):
    parsed = parse(f"good 1\n{line}\n")
    assert [s.name for s in parsed.samples] == ["good"]
    assert parsed.bad_lines == 1
