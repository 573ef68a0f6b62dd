"""``balancer agent`` on real Apache Kafka brokers (KRaft, three nodes, each running the Prometheus JMX
exporter's java agent), started once for this module (once per lane: `make test` runs the tests that
start no Spark in a process of their own).

Loads: producers whose achieved rates come from their own delivery reports; the records both sources publish
are run through the job (source.format cruise-control), and its broker loads are compared with those rates
(network in, within 10%) and with DescribeLogDirs (disk). Faults: an endpoint down for a while, a broker
restarted, garbage on an endpoint, a topic deleted while measured."""

from __future__ import annotations

import json
import logging
import time
import uuid

import pytest
from kafka.admin import KafkaAdminClient
from support import job_config

from balancer import cruise_control as cc
from balancer.agent.runner import Agent
from balancer.config import load_config
from balancer.demo.kafka_cluster import KafkaCluster
from balancer.resources import resource_root
from balancer.spark import job
from balancer.spark.lakehouse import Lakehouse

from .kafka_load import Endpoint, Load, published, relay

pytestmark = pytest.mark.integration

# Short windows and intervals keep the module quick; the producers are steady, so a window of five
# readings measures their rates as well as a longer one would. An interval under 3 s would leave a scrape
# slower than 1.5 s (common on a busy two-core box) untimed (MAX_SKEW_INTERVALS).
WINDOW_MS = 15_000
INTERVAL_S = 3
ASSIGNMENT = [[1, 2], [2, 3], [3, 1]]  # partition p led by ASSIGNMENT[p][0]
RATES = {0: 40_000.0, 1: 16_000.0, 2: 8_000.0}  # bytes/s per partition: each broker a different sum


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    rules = resource_root() / "conf" / "jmx-exporter" / "kafka.yml"
    with KafkaCluster(tmp_path_factory.mktemp("exported"), jmx_exporter=rules) as cluster:
        yield cluster


def agent_config(cluster: KafkaCluster, metrics_bootstrap: str, topic: str, source: str, *extra: str):
    endpoints = [f"agent.jmx.endpoints.{b}={url}" for b, url in cluster.metrics_urls.items()]
    return load_config(
        None,
        [
            f"source.bootstrap_servers={metrics_bootstrap}",
            f"source.topic={topic}",
            f"agent.bootstrap_servers={cluster.bootstrap_servers}",
            f"agent.source={source}",
            f"agent.interval={INTERVAL_S} seconds",
            *(endpoints if source == "jmx" else []),
            *extra,
        ],
    )


def log_dir_sizes(cluster: KafkaCluster) -> dict[int, float]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        return {
            int(answer["broker"]): float(
                sum(
                    p["partition_size"]
                    for log_dir in answer["log_dirs"]
                    for topic in log_dir["topics"]
                    for p in topic["partitions"]
                    if not p["is_future_key"]
                )
            )
            for answer in client.describe_log_dirs()
        }
    finally:
        client.close()


def sleep_until(epoch_ms: int) -> None:
    time.sleep(max(0.0, epoch_ms / 1000 - time.time()))


def test_loads_through_the_job_match_producer_rates_and_log_dirs(spark, broker, exported, tmp_path):
    topic = f"orders.{uuid.uuid4().hex[:6]}"  # a dot: Cruise Control's records spell it orders_...
    exported.create_topic(topic, assignment=ASSIGNMENT)
    metrics = {source: f"agent-{source}-{uuid.uuid4().hex[:6]}" for source in ("jmx", "admin")}
    for name in metrics.values():
        broker.create_topic(name, partitions=1)
    agents = {
        source: Agent(agent_config(exported, broker.bootstrap_servers, name, source))
        for source, name in metrics.items()
    }
    load = Load(exported.bootstrap_servers, topic, RATES).start()
    for agent in agents.values():
        agent.start()
    # Window 1 is full of steady traffic (baselines taken before it); window 2 sees the sizes once the
    # producers stopped, so its latest sizes are what DescribeLogDirs says afterwards.
    first = (int(time.time() * 1000) + 12_000) // WINDOW_MS * WINDOW_MS + WINDOW_MS
    try:
        sleep_until(first + WINDOW_MS + 500)
        load.stop()
        sleep_until(first + 2 * WINDOW_MS + 8_000)  # past window 2's end + the watermark + one report
    finally:
        load.stop()
        totals = {source: agent.stop() for source, agent in agents.items()}
    sizes = log_dir_sizes(exported)
    assert load.errors == 0
    achieved = load.achieved(first, first + WINDOW_MS)
    expected_in = {
        b: sum(achieved[p] for p, replicas in enumerate(ASSIGNMENT) if b in replicas) for b in (1, 2, 3)
    }

    capacity = tmp_path / "capacity.json"
    capacity.write_text(
        json.dumps(
            {
                "brokerCapacities": [
                    {
                        "brokerId": "-1",
                        "capacity": {"DISK": "100000", "CPU": "100", "NW_IN": "10000", "NW_OUT": "10000"},
                    }
                ]
            }
        )
    )
    measured = {}
    for source, name in metrics.items():
        config = job_config(
            tmp_path / source,
            broker.bootstrap_servers,
            name,
            "source.format=cruise-control",
            f"source.cluster=agent-{source}",
            "metadata.source=kafka",
            f"metadata.bootstrap_servers={exported.bootstrap_servers}",
            f"capacity.path={capacity}",
            f"windows.size={WINDOW_MS // 1000} seconds",
            f"windows.slide={WINDOW_MS // 1000} seconds",
            "windows.watermark=5 seconds",
        )
        job.run_until_idle(spark, job.start(spark, config, once=True))
        rows = Lakehouse(spark, config.lakehouse.path, engine="delta-rs").read("broker_load").collect()
        measured[source] = {(int(r["window_start"].timestamp() * 1000), r["broker"]): r for r in rows}
    for source, loads in measured.items():
        network_in = {b: loads[(first, b)]["network_in"] for b in (1, 2, 3)}
        disk = {b: loads[(first + WINDOW_MS, b)]["disk"] for b in (1, 2, 3)}
        cpu = totals[source].cpu_s / totals[source].ticks
        print(
            f"\n{source}: network_in {network_in} vs producers {expected_in}; "
            f"disk {disk} vs log dirs {sizes}; cpu {cpu * 1000:.1f} ms per interval"
        )
        for b in (1, 2, 3):
            assert network_in[b] == pytest.approx(expected_in[b], rel=0.10), (source, b)
            assert disk[b] == pytest.approx(sizes[b], rel=0.001), (source, b)


@pytest.mark.no_spark
def test_an_endpoint_down_for_a_while_is_a_gap_never_a_zero(broker, exported, caplog):
    caplog.set_level(logging.INFO, logger="balancer.agent")
    topic = f"steady-{uuid.uuid4().hex[:6]}"
    exported.create_topic(topic, assignment=[[1]])
    metrics = f"agent-gap-{uuid.uuid4().hex[:6]}"
    broker.create_topic(metrics, partitions=1)
    endpoint = Endpoint(relay(exported.metrics_urls[1]))
    config = agent_config(exported, broker.bootstrap_servers, metrics, "jmx")
    agent = Agent(config, endpoints={1: endpoint.url, 2: exported.metrics_urls[2]})
    load = Load(exported.bootstrap_servers, topic, {0: 20_000.0}).start()
    try:
        time.sleep(3)
        for _ in range(3):
            agent.tick()
            time.sleep(INTERVAL_S)
        endpoint.down()
        down_from = int(time.time() * 1000)
        for _ in range(3):
            report = agent.tick()
            assert 1 in report.failed and report.measured == [2]
            time.sleep(INTERVAL_S)
        up_from = int(time.time() * 1000)
        endpoint.up()
        for _ in range(3):
            agent.tick()
            time.sleep(INTERVAL_S)
    finally:
        load.stop()
        endpoint.down()
        agent.stop()
    # Round trips are those of the 15 scrapes that answered (9 intervals x 2 endpoints, 3 of them down).
    assert len(agent.source.round_trips.recent) == 15
    assert 0 < max(agent.source.round_trips.recent) < config.agent.jmx.timeout.seconds
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("interval:")]
    assert len(lines) == 9, lines
    assert "scrape round trips p50 " in lines[-1] and "over the last 15 scrapes" in lines[-1], lines[-1]
    rows = [r for r in published(broker.bootstrap_servers, metrics) if r["broker"] == 1]
    assert not [r for r in rows if down_from <= r["ts"] < up_from], "records for broker 1 while it was down"
    rates = [r["value"] for r in rows if r["name"] == "TOPIC_BYTES_IN" and r["topic"] == topic]
    # Before and after the hole: measured rates of the 20 kB/s producer, none a zero standing in for the hole.
    assert len(rates) >= 3
    assert all(10_000 < rate < 40_000 for rate in rates), rates


@pytest.mark.no_spark
def test_a_restarted_broker_gives_no_negative_or_spiking_rate(broker, exported):
    topic = f"restart-{uuid.uuid4().hex[:6]}"
    exported.create_topic(topic, assignment=[[2, 3]])
    metrics = f"agent-restart-{uuid.uuid4().hex[:6]}"
    broker.create_topic(metrics, partitions=1)
    agent = Agent(agent_config(exported, broker.bootstrap_servers, metrics, "jmx"))
    load = Load(exported.bootstrap_servers, topic, {0: 20_000.0}).start()
    try:
        time.sleep(3)
        for _ in range(3):
            agent.tick()
            time.sleep(INTERVAL_S)
        exported.stop_node(2)
        agent.tick()
        exported.start_node(2)
        for _ in range(4):
            agent.tick()
            time.sleep(INTERVAL_S)
    finally:
        load.stop()
        agent.stop()
    rows = published(broker.bootstrap_servers, metrics)
    rates = [
        r["value"] for r in rows if r["name"] in ("TOPIC_BYTES_IN", "ALL_TOPIC_BYTES_IN") and r["broker"] == 2
    ]
    assert rates, "broker 2 published no byte rates"
    assert agent.source.rates.counts.resets >= 1
    # Its counts began again at 0 after the restart: no rate may be negative or above what was produced.
    assert all(0 <= rate < 30_000 for rate in rates), max(rates)


@pytest.mark.no_spark
def test_garbage_on_an_endpoint_publishes_nothing_for_that_broker(broker, exported):
    metrics = f"agent-junk-{uuid.uuid4().hex[:6]}"
    broker.create_topic(metrics, partitions=1)
    bodies = iter(
        [
            b"<html><body>502 Bad Gateway</body></html>",
            bytes(range(256)) * 4,
            # Looks like the exporter, says the impossible: a negative count, then a jump of 1e300 bytes.
            b'kafka_server_brokertopicmetrics_bytesin_total{topic="x"} -5\n'
            b'kafka_log_log_size{topic="x",partition="0"} NaN\n',
            b'kafka_server_brokertopicmetrics_bytesin_total{topic="x"} 10\n'
            b'kafka_log_log_size{topic="x",partition="0"} 1e300\n',
            b'kafka_server_brokertopicmetrics_bytesin_total{topic="x"} 1e300\n'
            b"java_lang_operatingsystem_processcpuload 7\n",
        ]
        * 2
    )
    junk = Endpoint(lambda: next(bodies))
    agent = Agent(
        agent_config(exported, broker.bootstrap_servers, metrics, "jmx"),
        endpoints={9: junk.url, 1: exported.metrics_urls[1]},
    )
    try:
        reports = []
        for _ in range(5):
            reports.append(agent.tick())
            time.sleep(1)
    finally:
        junk.down()
        agent.stop()
    junk_rows = [r for r in published(broker.bootstrap_servers, metrics) if r["broker"] == 9]
    assert junk_rows == [], junk_rows
    assert [9 in r.failed for r in reports] == [True, True, False, False, False]
    assert all(1 in r.measured for r in reports)
    assert agent.source.unmapped.total() > 0
    assert sum(sum(r.rejected.values()) for r in reports) >= 1  # the 1e300 size withheld at publishing


@pytest.mark.no_spark
@pytest.mark.parametrize("source", ["jmx", "admin"])
def test_a_topic_deleted_while_measured(broker, exported, source):
    topic = f"doomed-{uuid.uuid4().hex[:6]}"
    exported.create_topic(topic, assignment=[[3, 1], [1, 3]])
    metrics = f"agent-delete-{source}-{uuid.uuid4().hex[:6]}"
    broker.create_topic(metrics, partitions=1)
    agent = Agent(agent_config(exported, broker.bootstrap_servers, metrics, source))
    load = Load(exported.bootstrap_servers, topic, {0: 10_000.0, 1: 5_000.0}).start()
    try:
        time.sleep(2)
        for _ in range(2):
            agent.tick()
            time.sleep(INTERVAL_S)
        load.stop()
        admin = exported.admin()
        for future in admin.delete_topics([topic], operation_timeout=30).values():
            future.result(60)
        reports = []
        for _ in range(3):
            reports.append(agent.tick())
            time.sleep(INTERVAL_S)
    finally:
        load.stop()
        agent.stop()
    assert all(r.failed == {} and r.measured == [1, 2, 3] for r in reports), reports
    rows = published(broker.bootstrap_servers, metrics)
    last = max(r["ts"] for r in rows)
    assert not [r for r in rows if r["ts"] == last and r["topic"] == topic.replace(".", "_")]
    assert all(r["value"] >= 0 and r["value"] < 1e9 for r in rows if r["metric_type"] != cc.PARTITION_SIZE)
