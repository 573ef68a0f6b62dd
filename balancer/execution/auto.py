"""``executor.mode: auto``: the job starts ``balancer execute PLAN_ID`` itself for each plan it proposes.

The executor runs as a process of its own, in its own session: a plan takes minutes to hours, longer
than a micro-batch should wait, and the job stopping (or being killed) must not stop a batch half-way
(it would leave the batch's throttles until the next start; ``execute`` resumes from the lakehouse
anyway). It gets the job's own configuration as a file (``<checkpoint>/executor/<plan>.yaml``, readable
by the owner only: it may hold credentials) and writes its lines to ``<checkpoint>/executor/<plan>.log``.

The job calls :func:`launch` once the plan's ``plan_batches`` are committed, so the executor never
meets a half-written plan. A plan that already has ``plan_executions`` rows (a replayed micro-batch
after a crash of the job) is not launched again: its executor is running or was, and an operator
resumes it with ``balancer execute``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from balancer.config import Config


def launch(
    config: Config, plan_id: str, folder: Path, *, started_before: bool
) -> subprocess.Popen[bytes] | None:
    """Start ``balancer execute plan_id`` with ``config`` in the background; None when ``started_before``
    (the plan already has an execution record)."""
    if started_before:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    config_file = folder / f"{plan_id}.yaml"
    text = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
    descriptor = os.open(config_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(text)
    log = folder / f"{plan_id}.log"
    env = {**os.environ, "BALANCER_LOG_FILE": str(log)}
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "balancer.cli.main", "execute", plan_id, "--config", str(config_file)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
