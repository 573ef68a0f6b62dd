"""What the JMX source makes of an exporter's body: both spellings mapped, the rest counted, resets."""

from __future__ import annotations

import pytest

from balancer import cruise_control as cc
from balancer.agent.jmx import JmxSource, Scrape, ScrapeError
from balancer.agent.measurement import RoundTrips

RULED = """\
kafka_server_brokertopicmetrics_bytesin_total{{topic="orders.v2"}} {bytes_in}
kafka_server_brokertopicmetrics_bytesin_total {bytes_in}
kafka_server_brokertopicmetrics_bytesout_total{{topic="orders.v2"}} 0
kafka_server_brokertopicmetrics_replicationbytesin_total 500
kafka_server_brokertopicmetrics_bytesrejected_total 0
kafka_log_log_size{{partition="3",topic="orders.v2"}} 4096
kafka_log_log_size{{topic="orders.v2"}} 4096
java_lang_operatingsystem_processcpuload 0.25
process_start_time_seconds {started}
jvm_threads_current 40
"""
# Amazon MSK's open monitoring: the exporter without rules.
DEFAULT = """\
kafka_server_BrokerTopicMetrics_Count{{name="BytesInPerSec",topic="clicks"}} {bytes_in}
kafka_server_BrokerTopicMetrics_Count{{name="MessagesInPerSec",}} {messages}
kafka_log_Log_Value{{name="Size",topic="clicks",partition="0",}} 777
kafka_log_Log_Value{{name="LogEndOffset",topic="clicks",partition="0",}} 12
"""


def source() -> JmxSource:
    return JmxSource(timeout_s=1, max_bytes=1 << 20, max_gap_s=15, max_rate=1e13, max_series=1000)


def test_the_standard_rules_names_map_to_cruise_control_types():
    jmx = source()
    first = jmx.read(Scrape(7, RULED.format(bytes_in=1000, started=1.0), 100.0))
    assert first.topic_rates == {}  # counters need a second reading
    assert first.sizes == {("orders.v2", 3): 4096.0}
    assert first.broker_values == {cc.BROKER_CPU_UTIL: 0.25}
    second = jmx.read(Scrape(7, RULED.format(bytes_in=11_000, started=1.0), 110.0))
    assert second.topic_rates == {
        (cc.TOPIC_BYTES_IN, "orders.v2"): pytest.approx(1000.0),
        (cc.TOPIC_BYTES_OUT, "orders.v2"): 0.0,
    }
    assert second.broker_values[cc.ALL_TOPIC_BYTES_IN] == pytest.approx(1000.0)
    assert second.broker_values[cc.ALL_TOPIC_REPLICATION_BYTES_IN] == 0.0
    # A size without its partition label and a meter Cruise Control has no type for: counted by name.
    assert jmx.unmapped.counts["kafka_log_log_size: no valid topic and partition labels"] == 2
    assert jmx.unmapped.counts["BrokerTopicMetrics bytesrejected: no Cruise Control metric"] == 2
    assert jmx.ignored == 4  # jvm_threads_current and process_start_time_seconds, twice


def test_the_exporter_without_rules_msk_maps_too():
    jmx = source()
    jmx.read(Scrape(1, DEFAULT.format(bytes_in=0, messages=0), 0.0))
    m = jmx.read(Scrape(1, DEFAULT.format(bytes_in=5000, messages=50), 10.0))
    assert m.topic_rates == {(cc.TOPIC_BYTES_IN, "clicks"): pytest.approx(500.0)}
    assert m.broker_values == {cc.ALL_TOPIC_MESSAGES_IN_PER_SEC: pytest.approx(5.0)}
    assert m.sizes == {("clicks", 0): 777.0}


def test_a_restarted_jvm_gives_no_rate_even_when_its_count_is_higher():
    jmx = source()
    jmx.read(Scrape(2, RULED.format(bytes_in=1000, started=1.0), 0.0))
    # Restarted (a new start time) and already past the old count: still not a rate over the interval.
    m = jmx.read(Scrape(2, RULED.format(bytes_in=900_000, started=50.0), 10.0))
    assert m.topic_rates == {} and cc.ALL_TOPIC_BYTES_IN not in m.broker_values
    assert jmx.rates.counts.resets == 1


@pytest.mark.parametrize("body", ["", "<html>502 Bad Gateway</html>\n", "\x89PNG\r\n\x1a\n\x00\x00"])
def test_a_body_without_samples_is_a_failed_scrape(body):
    with pytest.raises(ScrapeError, match="no Prometheus samples"):
        source().read(Scrape(1, body, 0.0))


def test_a_slow_answer_times_no_rate_and_starts_none_but_its_sizes_count():
    """A scrape is timed at the middle of its round trip; a cold exporter's first answer can take seconds,
    and a count timed that loosely would make a rate tens of percent off. With a 0.25 s skew allowed, a
    3 s answer between two good ones leaves one interval without rates, never a wrong one."""
    jmx = JmxSource(
        timeout_s=5, max_bytes=1 << 20, max_gap_s=30, max_rate=1e13, max_series=1000, max_skew_s=0.25
    )
    jmx.read(Scrape(7, RULED.format(bytes_in=0, started=1.0), 100.0, round_trip_s=0.1))
    slow = jmx.read(Scrape(7, RULED.format(bytes_in=10_000, started=1.0), 110.0, round_trip_s=3.0))
    assert slow.topic_rates == {} and cc.ALL_TOPIC_BYTES_IN not in slow.broker_values
    assert slow.sizes == {("orders.v2", 3): 4096.0}
    assert jmx.untimed.total() == 1
    after = jmx.read(Scrape(7, RULED.format(bytes_in=20_000, started=1.0), 120.0, round_trip_s=0.1))
    assert after.topic_rates == {}, "the slow reading must not be the next rate's baseline"
    good = jmx.read(Scrape(7, RULED.format(bytes_in=25_000, started=1.0), 125.0, round_trip_s=0.4))
    assert good.topic_rates[(cc.TOPIC_BYTES_IN, "orders.v2")] == pytest.approx(1000.0)


def test_round_trips_report_the_median_and_slowest_of_the_latest_scrapes_only():
    trips = RoundTrips(keep=3)
    assert trips.summary() == ""
    for seconds in (5.0, 0.010, 0.030, 0.020):  # the 5 s one is older than the last 3
        trips.add(seconds)
    assert trips.summary() == "p50 20 ms, max 30 ms over the last 3 scrapes"


def _object_keys(text: str) -> dict[str, str]:
    return dict(part.strip().split("=", 1) for part in text.split(",") if "=" in part)


def test_every_rule_reads_mbeans_the_exporter_is_told_to_collect():
    """The exporter collects only the MBeans ``includeObjectNames`` names (JMX patterns such as
    ``domain:key=value,*``), then applies the rules: a rule whose MBean is not among them exports nothing."""
    import yaml

    from balancer.resources import resource_root

    config = yaml.safe_load((resource_root() / "conf" / "jmx-exporter" / "kafka.yml").read_text())
    includes = []
    for name in config["includeObjectNames"]:
        domain, keys = name.split(":", 1)
        includes.append((domain, _object_keys(keys), keys.endswith("*")))
    assert config["rules"], "no rules"
    for rule in config["rules"]:
        domain, rest = rule["pattern"].split("<", 1)
        keys = _object_keys(rest.split(">", 1)[0])
        matched = [
            (d, k)
            for d, k, open_ended in includes
            if d == domain
            and all(keys.get(key) == value for key, value in k.items())
            and (open_ended or set(keys) == set(k))
        ]
        assert matched, f"rule {rule['pattern']!r} reads an MBean includeObjectNames leaves out"
