"""A Spark standalone cluster on this machine: one master and N workers on loopback, started from
the venv's own pyspark (``spark-class``; nothing downloaded).

Used by the tests (a fixture submits the job to it), by the fleet benchmark, and by a person:

    python -m balancer.demo.cluster up [--workers 2] [--cores 1] [--memory 1g] [--dir data/cluster]
    python -m balancer.demo.cluster down [--dir data/cluster]

(``make cluster-up`` / ``make cluster-down``). ``up`` prints the master URL and leaves the
processes running; their process groups are recorded in ``DIR/cluster.json`` for ``down``.

Every process gets a free port, its own work and log folder under the cluster's folder, and its own
process group, so stopping kills the JVM and whatever it started (executors, Python workers).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from balancer.demo.ports import free_port

HOST = "127.0.0.1"


def spark_class() -> str:
    """The ``spark-class`` launcher of the pyspark this interpreter imports."""
    import pyspark

    return str(Path(pyspark.__file__).resolve().parent / "bin" / "spark-class")


def get_json(url: str, timeout: float = 5.0) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


@dataclass
class StandaloneCluster:
    """Master + ``workers`` workers, each with ``cores`` cores and ``memory`` for its executors."""

    root: Path
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    master_port: int = 0
    master_webui_port: int = 0
    worker_webui_ports: list[int] = field(default_factory=list)
    pgids: list[int] = field(default_factory=list)
    _children: list[subprocess.Popen] = field(default_factory=list, repr=False)

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    @property
    def webui_url(self) -> str:
        return f"http://{HOST}:{self.master_webui_port}"

    def _env(self, name: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "SPARK_LOCAL_IP": HOST,
                "SPARK_LOG_DIR": str(self.root / "logs"),
                "SPARK_LOCAL_DIRS": str(self.root / name / "local"),
                "SPARK_WORKER_DIR": str(self.root / name / "work"),
                # Executors' Python workers: this interpreter (every worker here shares the venv).
                "PYSPARK_PYTHON": sys.executable,
            }
        )
        return env

    def _launch(self, name: str, args: list[str]) -> None:
        for sub in ("local", "work"):
            (self.root / name / sub).mkdir(parents=True, exist_ok=True)
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        with open(self.root / "logs" / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                [spark_class(), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self._env(name),
                start_new_session=True,
            )
        self.pgids.append(proc.pid)  # start_new_session: the pid is the group id
        self._children.append(proc)

    def start(self, timeout: float = 120.0) -> StandaloneCluster:
        self.root = Path(self.root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.master_port, self.master_webui_port = free_port(), free_port()
        try:
            self._launch(
                "master",
                [
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    HOST,
                    "--port",
                    str(self.master_port),
                    "--webui-port",
                    str(self.master_webui_port),
                ],
            )
            for i in range(self.workers):
                port = free_port()
                self.worker_webui_ports.append(port)
                self._launch(
                    f"worker-{i + 1}",
                    [
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        HOST,
                        "--port",
                        str(free_port()),
                        "--webui-port",
                        str(port),
                        "--cores",
                        str(self.cores),
                        "--memory",
                        self.memory,
                        "--work-dir",
                        str(self.root / f"worker-{i + 1}" / "work"),
                        self.master_url,
                    ],
                )
            self.wait_for_workers(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def status(self) -> dict:
        """The master's JSON status (workers, activeapps, completedapps)."""
        return get_json(f"{self.webui_url}/json")

    def worker_status(self, i: int) -> dict:
        """Worker ``i``'s JSON status (its ``executors`` and ``finishedexecutors``, with their appid)."""
        return get_json(f"http://{HOST}:{self.worker_webui_ports[i]}/json")

    def wait_for_workers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        alive = 0
        while time.monotonic() < deadline:
            for child in self._children:
                if child.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited during start-up; logs in {self.root / 'logs'}")
            try:
                alive = sum(w["state"] == "ALIVE" for w in self.status().get("workers", []))
            except (OSError, ValueError):
                # The master's UI is not up yet, or is up but not yet serving its JSON page (a Spark
                # 4 master answers /json with its HTML page for a moment after it binds).
                alive = 0
            if alive >= self.workers:
                return
            time.sleep(0.5)
        raise TimeoutError(
            f"{alive} of {self.workers} workers registered with {self.master_url} "
            f"within {timeout:.0f} s; logs in {self.root / 'logs'}"
        )

    def stop(self) -> None:
        """SIGTERM every process group (master last), then SIGKILL what is left after a grace period."""
        groups = list(reversed(self.pgids))
        for pgid in groups:
            _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not all(_group_gone(g) for g in groups):
            for child in self._children:
                child.poll()  # reap: a zombie leader still counts as a member of its group
            time.sleep(0.2)
        for pgid in groups:
            _signal_group(pgid, signal.SIGKILL)
        for child in self._children:
            child.wait(timeout=30)
        self.pgids.clear()
        self._children.clear()

    def save(self) -> Path:
        state = self.root / "cluster.json"
        state.write_text(
            json.dumps(
                {
                    "master_url": self.master_url,
                    "webui_url": self.webui_url,
                    "worker_webui_ports": self.worker_webui_ports,
                    "pgids": self.pgids,
                }
            )
        )
        return state

    @classmethod
    def load(cls, root: Path) -> StandaloneCluster:
        state = json.loads((Path(root) / "cluster.json").read_text())
        cluster = cls(Path(root), workers=len(state["worker_webui_ports"]))
        cluster.master_port = int(state["master_url"].rsplit(":", 1)[1])
        cluster.master_webui_port = int(state["webui_url"].rsplit(":", 1)[1])
        cluster.worker_webui_ports = state["worker_webui_ports"]
        cluster.pgids = state["pgids"]
        return cluster

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def application_executors(cluster: StandaloneCluster, app_id: str) -> list[int]:
    """Indexes of the workers that ran (or run) an executor of application ``app_id``."""
    used = []
    for i in range(len(cluster.worker_webui_ports)):
        worker = cluster.worker_status(i)
        executors = worker.get("executors", []) + worker.get("finishedexecutors", [])
        if any(e.get("appid") == app_id for e in executors):
            used.append(i)
    return used


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m balancer.demo.cluster",
        description="start or stop a Spark standalone cluster on loopback",
    )
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument(
        "--dir", default="data/cluster", help="work, log and state folder (default data/cluster)"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--memory", default="1g", help="executor memory per worker")
    args = parser.parse_args(argv)
    root = Path(args.dir)
    if args.action == "down":
        if not (root / "cluster.json").exists():
            print(f"no cluster recorded in {root}")
            return 0
        StandaloneCluster.load(root).stop()
        (root / "cluster.json").unlink()
        print("stopped")
        return 0
    if (root / "cluster.json").exists():
        running = StandaloneCluster.load(root)
        if not all(_group_gone(g) for g in running.pgids):
            print(
                f"already running: {running.master_url} (web UI {running.webui_url}); stop it with make "
                "cluster-down"
            )
            return 1
    cluster = StandaloneCluster(root, workers=args.workers, cores=args.cores, memory=args.memory).start()
    cluster.save()
    print(
        f"master: {cluster.master_url}  (web UI {cluster.webui_url}; {args.workers} workers x "
        f"{args.cores} core, {args.memory})"
    )
    print(f"submit: ./spark-submit.sh --master {cluster.master_url} --once --config conf/local.yaml")
    print("stop:   make cluster-down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
