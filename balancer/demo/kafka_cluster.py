"""A real Apache Kafka cluster on loopback: KRaft nodes started from the jars `make setup` resolved.

Each node is one JVM in combined mode (broker + controller; three nodes make a three-voter quorum, so
one node can stop and the cluster keeps a controller), with its own ``broker.rack``, a small heap and
its log in ``<dir>/node-<id>/server.log``. Storage is formatted with ``kafka.tools.StorageTool``, which
also creates the SCRAM user of the SASL listener. Every node has three listeners:

* ``PLAINTEXT`` on ``bootstrap_servers`` (clients and replication),
* ``SASL`` (SASL_PLAINTEXT, SCRAM-SHA-256) on ``sasl_bootstrap_servers``, user ``scram_user``,
* ``CONTROLLER`` for the quorum.

Used by the tests (one cluster per test session), by ``make kafka-up`` / ``make kafka-down``, and by the
demo. The JVMs of a cluster started by a test die with the process that started them (Linux's parent-death
signal), so an interrupted or killed test run leaves no broker behind; ``down`` and the next ``start`` in
the same folder also stop what its pid files name.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic, ResourceType

from balancer.demo.ports import free_port
from balancer.jvm import SHORT_LIVED_OPTIONS, JarSet, classpath, jars

SCRAM_MECHANISM = "SCRAM-SHA-256"
_PR_SET_PDEATHSIG = 1
LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = INFO
"""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """The JVM gets SIGTERM when the process that started it dies, however it dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Node:
    node_id: int
    rack: str
    port: int
    sasl_port: int
    controller_port: int
    directory: Path
    metrics_port: int | None = None  # the JMX exporter's HTTP port, when the cluster runs it
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def pid_file(self) -> Path:
        return self.directory / "pid"

    @property
    def log(self) -> Path:
        return self.directory / "server.log"

    @property
    def metrics_url(self) -> str | None:
        """The JMX exporter's endpoint on this node (None: the cluster runs no exporter)."""
        return None if self.metrics_port is None else f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


def random_cluster_id() -> str:
    """A cluster id as ``kafka-storage random-uuid`` gives it: a random UUID in URL-safe base64, never one
    that starts with '-' (Kafka's ``Uuid.randomUuid`` rule: the storage tool would read it as an option
    and refuse to format, one start in 64)."""
    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not candidate.startswith("-"):
            return candidate


class KafkaCluster:
    """``size`` KRaft nodes on loopback under ``directory``; a context manager.

    ``heap`` is each JVM's -Xmx. ``tie_to_parent`` (the tests) makes the JVMs die with this process; the
    ``make kafka-up`` command leaves it off so the cluster outlives the command. ``jmx_exporter``, a
    Prometheus JMX exporter rules file (e.g. conf/jmx-exporter/kafka.yml), runs the exporter's java agent
    in every node on a port of its own (``Node.metrics_url``, ``metrics_urls``), kept across restarts.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        size: int = 3,
        racks: list[str] | None = None,
        heap: str = "320m",
        scram_user: str = "balancer",
        scram_password: str | None = None,
        tie_to_parent: bool = True,
        jmx_exporter: str | Path | None = None,
    ):
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        racks = racks or [f"rack-{chr(ord('a') + i)}" for i in range(size)]
        if len(racks) != size:
            raise ValueError(f"racks must name one rack per node ({size}), got {racks}")
        self.directory = Path(directory).resolve()
        self.heap = heap
        self.scram_user = scram_user
        self.scram_password = scram_password or uuid.uuid4().hex
        self.tie_to_parent = tie_to_parent
        self.jmx_exporter = None if jmx_exporter is None else Path(jmx_exporter).resolve()
        if self.jmx_exporter is not None and not self.jmx_exporter.is_file():
            raise ValueError(f"jmx_exporter: no rules file at {self.jmx_exporter}")
        self.cluster_id = random_cluster_id()
        self.nodes = [Node(i + 1, racks[i], 0, 0, 0, self.directory / f"node-{i + 1}") for i in range(size)]
        self._new_ports()

    def _new_ports(self) -> None:
        """Ports of their own for every node, and the exporter's when the cluster runs it."""
        for node in self.nodes:
            node.port, node.sasl_port, node.controller_port = free_port(), free_port(), free_port()
            if self.jmx_exporter is not None:
                node.metrics_port = free_port()

    # -- addresses -------------------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)

    @property
    def sasl_bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{node.sasl_port}" for node in self.nodes)

    def sasl_options(self, password: str | None = None) -> dict[str, str]:
        """librdkafka / Kafka client settings for the SASL listener (``password`` to try a wrong one)."""
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": SCRAM_MECHANISM,
            "sasl.username": self.scram_user,
            "sasl.password": self.scram_password if password is None else password,
        }

    @property
    def metrics_urls(self) -> dict[int, str]:
        """Node id -> its JMX exporter endpoint (empty: the cluster runs no exporter)."""
        return {n.node_id: n.metrics_url for n in self.nodes if n.metrics_url is not None}

    def node(self, node_id: int) -> Node:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(f"no node {node_id}; nodes: {[n.node_id for n in self.nodes]}")

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap_servers})

    def throttles(
        self, topics: Iterable[str], *, brokers: Iterable[int] | None = None
    ) -> dict[str, dict[str, str]]:
        """Every replication-throttle key set (not Kafka's default) on ``brokers`` (default: every node)
        and ``topics``, as confluent-kafka reads them (not the executor's kafka-python client, so a check
        of what the executor left does not share its reading): "broker 1" / "topic t" -> key -> value."""
        from balancer.execution.executor import RATE_KEYS, REPLICA_KEYS

        client = self.admin()
        ids = [n.node_id for n in self.nodes] if brokers is None else list(brokers)
        resources = [ConfigResource(ResourceType.BROKER, str(b)) for b in ids]
        resources += [ConfigResource(ResourceType.TOPIC, t) for t in topics]
        found = {}
        for resource in resources:  # one resource per DescribeConfigs call (librdkafka's rule for brokers)
            configs = client.describe_configs([resource])[resource].result(timeout=30)
            values = {
                k: configs[k].value
                for k in RATE_KEYS + REPLICA_KEYS
                if k in configs
                and configs[k].source not in (ConfigSource.DEFAULT_CONFIG, ConfigSource.DEFAULT_CONFIG.value)
                and configs[k].value
            }
            if values:
                found[f"{resource.restype.name.lower()} {resource.name}"] = values
        return found

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self, timeout: float = 120.0, *, nodes: list[int] | None = None) -> KafkaCluster:
        """Format storage (fresh) for every node and start ``nodes`` (default: all); ready once they are
        registered. A node left out joins later with ``start_node`` (a broker added to the cluster: it
        holds nothing until a reassignment gives it replicas); a quorum of four needs three of them up.

        A node that exits because a port it was given is taken (by a process that is not ours, between
        the choice and the bind) makes the whole cluster start again on new ports, up to twice."""
        for _ in range(2):
            try:
                return self._start(timeout, nodes)
            except NodeExitedError as exited:
                if not exited.port_taken:
                    raise
                self.stop()
                self._new_ports()
        return self._start(timeout, nodes)

    def _start(self, timeout: float, nodes: list[int] | None) -> KafkaCluster:
        stop_recorded(self.directory)
        if self.directory.exists():
            shutil.rmtree(self.directory)
        for node in self.nodes:
            node.directory.mkdir(parents=True)
            (node.directory / "server.properties").write_text(self._properties(node))
            (node.directory / "log4j2.properties").write_text(LOG4J2.format(log=node.log))
        self._format()
        (self.directory / "cluster.json").write_text(json.dumps(self.describe(), indent=2))
        atexit.register(self.stop)
        starting = [n.node_id for n in self.nodes if nodes is None or n.node_id in nodes]
        for node_id in starting:
            self.start_node(node_id, wait=False)
        self.wait_ready(timeout, nodes=starting)
        return self

    def describe(self) -> dict:
        return {
            "bootstrap_servers": self.bootstrap_servers,
            "sasl_bootstrap_servers": self.sasl_bootstrap_servers,
            "scram_user": self.scram_user,
            "scram_mechanism": SCRAM_MECHANISM,
            "nodes": [
                {"id": n.node_id, "rack": n.rack, "port": n.port, "log": str(n.log), "metrics": n.metrics_url}
                for n in self.nodes
            ],
        }

    def start_node(self, node_id: int, *, wait: bool = True, timeout: float = 90.0) -> None:
        node = self.node(node_id)
        if node.running:
            return
        command = [
            shutil.which("java") or "java",
            f"-Xmx{self.heap}",
            f"-Xms{self.heap}",
            # Two cores shared with Spark and the tests: the short-lived drivers' JVM options (C1, its code
            # cache, the serial GC; balancer.jvm), and few compiler threads.
            *SHORT_LIVED_OPTIONS,
            "-XX:CICompilerCount=2",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile=file:{node.directory / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={node.directory}",
            *self._agent_options(node),
            "-cp",
            classpath(JarSet.KAFKA),
            "kafka.Kafka",
            str(node.directory / "server.properties"),
        ]
        with open(node.directory / "stdout.log", "ab") as out:
            node.process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent if self.tie_to_parent else None,
            )
        node.pid_file.write_text(str(node.process.pid))
        if wait:
            self.wait_ready(timeout, nodes=[node_id])

    def stop_node(self, node_id: int, *, kill: bool = False, timeout: float = 60.0) -> None:
        """A clean shutdown (SIGTERM: the broker hands its leaderships over) or ``kill`` (SIGKILL)."""
        node = self.node(node_id)
        process, node.process = node.process, None
        if process is not None:
            _terminate(process.pid, process, kill=kill, timeout=timeout)
        node.pid_file.unlink(missing_ok=True)

    def stop(self) -> None:
        """Every node at once: SIGTERM, and SIGKILL for any still up after 15 s (a quorum shutting down
        whole cannot finish every controlled shutdown, and the data does not outlive the cluster)."""
        running = [(node, node.process) for node in self.nodes if node.process is not None]
        for _node, process in running:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for node, process in running:
            _terminate(process.pid, process, kill=False, timeout=15)
            node.process = None
            node.pid_file.unlink(missing_ok=True)

    def wait_ready(self, timeout: float = 120.0, *, nodes: list[int] | None = None) -> None:
        """Until the brokers ``nodes`` (default: all) are registered and answer metadata."""
        wanted = set(nodes or [n.node_id for n in self.nodes])
        deadline = time.monotonic() + timeout
        seen: set[int] = set()
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node.node_id in wanted and node.process is not None and node.process.poll() is not None:
                    raise NodeExitedError(node, node.process.returncode)
            try:
                if not all(_listening(n.port) for n in self.nodes if n.node_id in wanted):
                    raise ConnectionRefusedError
                quiet = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
                metadata = quiet.list_topics(timeout=3)
                seen = set(metadata.brokers)
                if wanted <= seen:
                    return
            except Exception:
                pass
            time.sleep(0.3)
        raise TimeoutError(
            f"Kafka brokers {sorted(wanted - seen)} not registered within {timeout:.0f}s "
            f"(logs under {self.directory})"
        )

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        replication_factor: int = 1,
        config: dict[str, str] | None = None,
        assignment: list[list[int]] | None = None,
    ) -> None:
        """A topic, with an explicit ``assignment`` (replicas per partition, leader first) when given."""
        if assignment is not None:
            # librdkafka wants the partition count spelled out beside an assignment (-1 is refused).
            topic = NewTopic(
                name, num_partitions=len(assignment), replica_assignment=assignment, config=config or {}
            )
        else:
            topic = NewTopic(
                name, num_partitions=partitions, replication_factor=replication_factor, config=config or {}
            )
        admin = self.admin()  # held until the futures resolve: a collected client fails them (_DESTROY)
        for future in admin.create_topics([topic], operation_timeout=30).values():
            future.result(timeout=60)
        self._wait_visible(name)

    def _wait_visible(self, name: str, timeout: float = 30.0) -> None:
        admin = self.admin()
        deadline = time.monotonic() + timeout
        while name not in admin.list_topics(timeout=10).topics:
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name} not in the metadata within {timeout:.0f}s")
            time.sleep(0.2)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # -- set-up ----------------------------------------------------------------------------------------
    def _agent_options(self, node: Node) -> list[str]:
        if self.jmx_exporter is None:
            return []
        (jar,) = jars(JarSet.JMX_EXPORTER)
        return [f"-javaagent:{jar}=127.0.0.1:{node.metrics_port}:{self.jmx_exporter}"]

    def _properties(self, node: Node) -> str:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        rf = min(3, len(self.nodes))
        lines = {
            "process.roles": "broker,controller",
            "node.id": node.node_id,
            "broker.rack": node.rack,
            "controller.quorum.voters": voters,
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{node.port},SASL://127.0.0.1:{node.sasl_port},"
                f"CONTROLLER://127.0.0.1:{node.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},SASL://127.0.0.1:{node.sasl_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            "listener.name.sasl.scram-sha-256.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            "log.dirs": node.directory / "data",
            "num.partitions": 1,
            "default.replication.factor": 1,
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": 6,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": "false",
            # Few threads: the cluster shares two cores with Spark and the tests.
            "num.network.threads": 2,
            "num.io.threads": 2,
            "num.replica.fetchers": 1,
            "background.threads": 2,
            "num.recovery.threads.per.data.dir": 1,
            # The log cleaner's offset map is one heap array allocated whole at start (128 MiB by default):
            # in a small heap it can fail to find room (OutOfMemoryError, the node exits). The compacted
            # topics here (consumer offsets, transactions) are small.
            "log.cleaner.dedupe.buffer.size": 8 * 1024 * 1024,
            # Idle work, which every node does all the time a suite or demo runs: the controller's no-op
            # metadata records every 5 s (default 0.5 s), a quarter of an idle node's CPU. (A longer
            # replica.fetch.wait.max.ms would save as much again, but a throttled follower's fetch waits
            # out the whole of it: throttled copies slow down.)
            "metadata.max.idle.interval.ms": 5000,
            "log.segment.bytes": 64 * 1024 * 1024,
            "log.retention.check.interval.ms": 60_000,
            # Replication throttles measured over 2 one-second samples (default 11): a throttled copy may
            # burst by about rate x samples before the quota holds it, which is less than the tests' moves.
            "replication.quota.window.num": 2,
            "replication.quota.window.size.seconds": 1,
            # A restarted broker takes its preferred leaderships back only when asked (the balancer's job).
            "auto.leader.rebalance.enable": "false",
        }
        return "".join(f"{key}={value}\n" for key, value in lines.items())

    def _format(self) -> None:
        scram = f"{SCRAM_MECHANISM}=[name={self.scram_user},password={self.scram_password}]"
        processes = []
        for node in self.nodes:
            command = [
                shutil.which("java") or "java",
                "-Xmx128m",
                "-XX:TieredStopAtLevel=1",
                f"-Dlog4j2.configurationFile=file:{node.directory / 'log4j2.properties'}",
                "-cp",
                classpath(JarSet.KAFKA),
                "kafka.tools.StorageTool",
                "format",
                "-t",
                self.cluster_id,
                "-c",
                str(node.directory / "server.properties"),
                "--add-scram",
                scram,
            ]
            processes.append(
                (node, subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
            )
        for node, process in processes:
            output, _ = process.communicate(timeout=120)
            if process.returncode != 0:
                raise RuntimeError(
                    f"formatting node {node.node_id}'s storage failed ({process.returncode}): "
                    f"{output.decode(errors='replace').strip()[-500:]}"
                )


def _terminate(pid: int, process: subprocess.Popen | None, *, kill: bool, timeout: float) -> None:
    try:
        os.killpg(pid, signal.SIGKILL if kill else signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None:
            if process.poll() is not None:
                return
        elif not _alive(pid):
            return
        time.sleep(0.1)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    if process is not None:
        process.wait(timeout=30)


class NodeExitedError(RuntimeError):
    """A Kafka node's JVM ended while it was awaited; the message carries the first error lines it logged."""

    def __init__(self, node: Node, code: int):
        self.node_id = node.node_id
        self.reason = _exit_reason(node)
        self.port_taken = "Address already in use" in self.reason or "BindException" in self.reason
        super().__init__(
            f"Kafka node {node.node_id} exited with code {code}: {self.reason} (log: {node.log})"
        )


def _exit_reason(node: Node, limit: int = 600) -> str:
    """The first error lines a node wrote (its server log, then what the JVM printed: the first is the
    cause, what follows is the shutdown it set off), or "no error logged"."""
    lines: list[str] = []
    for path in (node.log, node.directory / "stdout.log"):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            line = line.strip()
            logged = line.startswith("[") and ("] ERROR " in line or "] FATAL " in line)
            thrown = not line.startswith("[") and re.match(r"(Caused by: )?[\w.$]+(Exception|Error)\b", line)
            if logged or thrown:
                lines.append(line)
    reason = " | ".join(list(dict.fromkeys(lines))[:4])
    return reason[:limit] if reason else "no error logged"


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie or a reused pid that is not a JVM of ours counts as gone
        return "kafka.Kafka" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def stop_recorded(directory: str | Path) -> int:
    """Stop every node whose pid file is under ``directory`` (a cluster this process did not start)."""
    stopped = 0
    for pid_file in Path(directory).glob("node-*/pid"):
        try:
            pid = int(pid_file.read_text().strip())
        except ValueError:
            pid_file.unlink(missing_ok=True)
            continue
        if _alive(pid):
            _terminate(pid, None, kill=False, timeout=60)
            stopped += 1
        pid_file.unlink(missing_ok=True)
    return stopped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafka_cluster", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("--dir", default="data/kafka")
    parser.add_argument("--size", type=int, default=3)
    parser.add_argument("--heap", default="320m")
    args = parser.parse_args(argv)
    if args.action == "down":
        stopped = stop_recorded(args.dir)
        print(f"stopped {stopped} Kafka node(s) under {args.dir}")
        return 0
    started = time.monotonic()
    cluster = KafkaCluster(args.dir, size=args.size, heap=args.heap, tie_to_parent=False)
    try:
        cluster.start()
    except Exception as exc:
        cluster.stop()
        print(f"kafka-up: {exc}", file=sys.stderr)
        return 1
    atexit.unregister(cluster.stop)  # the cluster outlives this command; `down` stops it
    print(f"Kafka {len(cluster.nodes)} brokers up in {time.monotonic() - started:.1f}s")
    print(f"  bootstrap (PLAINTEXT): {cluster.bootstrap_servers}")
    print(f"  bootstrap (SASL_PLAINTEXT, {SCRAM_MECHANISM}): {cluster.sasl_bootstrap_servers}")
    print(f"  SCRAM user {cluster.scram_user}, password in {cluster.directory / 'scram-password'}")
    (cluster.directory / "scram-password").write_text(cluster.scram_password + "\n")
    (cluster.directory / "scram-password").chmod(0o600)
    print(f"  racks: {', '.join(f'{n.node_id}={n.rack}' for n in cluster.nodes)}; logs: {cluster.directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
