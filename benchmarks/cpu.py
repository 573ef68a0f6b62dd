"""CPU seconds per process, from /proc: on a shared 2-core host, CPU is what limits a run, and what
compares between runs when wall time moves with other load."""

from __future__ import annotations

import os
from pathlib import Path


def processes():
    """(pid, parent pid, cmdline, [utime, stime, cutime, cstime] in s) of every live process."""
    tick = os.sysconf("SC_CLK_TCK")
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes()
                fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            yield int(proc.name), int(fields[1]), cmd, [int(x) / tick for x in fields[11:15]]


def spark_cpu_seconds() -> tuple[float, float, float]:
    """(JVM, Python workers, driver) CPU seconds so far, counting only this process's Spark: our java
    child and the processes it started (pyspark daemons, their workers), not another job's on the host."""
    procs = {pid: (parent, cmd, times) for pid, parent, cmd, times in processes()}
    jvm = [pid for pid, (parent, cmd, _) in procs.items() if parent == os.getpid() and b"java" in cmd]
    ours, frontier = set(), list(jvm)
    while frontier:
        ours.update(frontier)
        frontier = [pid for pid, (parent, _, _) in procs.items() if parent in frontier and pid not in ours]
    java = sum(procs[pid][2][0] + procs[pid][2][1] for pid in jvm)
    # A daemon's cutime/cstime holds its workers that exited.
    workers = sum(sum(procs[pid][2]) for pid in ours - set(jvm))
    me = os.times()
    return java, workers, me.user + me.system


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process (and its exited children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
