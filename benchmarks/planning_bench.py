"""Planning inside the job: one (cluster, window) through ``plan_group``, stage by stage.

    .venv/bin/python benchmarks/planning_bench.py            # 270 brokers, ~1.32M replicas
    .venv/bin/python benchmarks/planning_bench.py --quick    # 270 brokers, ~128k replicas
                                                             # (ingest_bench --quick)
    .venv/bin/python benchmarks/planning_bench.py --path dict --profile goals

The cluster is ``ingest_bench``'s (``balancer.demo.scenarios`` scale_270, or its 300-topic quick
variant). Each *window* is one noisy re-measurement of that same, never rebalanced, cluster,
the way the streaming job replans every window without the previous plan being executed
(``--executed``: with it carried out in between, as an executor would):
per partition the leader's bytes_in / bytes_out jittered by ``SimulatedCluster``'s rule
(× max(0, 1 + N(0, noise)), noise 3%), fresh noise per window. The pandas frames are built
exactly as ``applyInPandas`` hands them to ``plan_group`` (checked against Spark 4.1: string
columns ``str``, INT ``int32``, a nullable INT with nulls ``float64``, ``replicas`` an object
column of int32 ndarrays, timestamps ``datetime64[ns]``, brokers with the ``_blocked`` column),
rows in shuffled order (a shuffle's output order).

Stages, timed separately (CPU-bound, one core): ``frames`` (pandas -> the snapshot builder's
input), ``snapshot`` (build_snapshot + its completeness checks), ``model`` (ClusterModel),
``goals`` (the goals, actions and figures, i.e. ``plan()`` without the model), ``rows`` (the
balance_plans row with actions and JSON), and ``plan_group`` end to end (the real function).
Times are CPU seconds of the process (the box is shared; wall time under load says little).
``plan_group`` (end to end, which plans again) runs on window 0 only. Peak memory is ru_maxrss
of the process after each stage. Each path runs in its own subprocess. ``--check`` asserts that both
paths give the same actions on every window.
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import io
import json
import os
import pstats
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from ingest_bench import FULL, QUICK  # the same 1.3M-replica cluster as the ingest benchmark

T0 = pd.Timestamp("2026-09-22 00:00:00")


def loadavg() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- frames as applyInPandas delivers them -----------------------------------------------------


def cluster_frames(
    snapshot: dict, *, noise: float, seed: int, window: int = 0
) -> tuple[tuple, pd.DataFrame, pd.DataFrame]:
    """(key, partition_rows, broker_rows) of one window: a noisy measurement of ``snapshot``."""
    rng = np.random.default_rng([seed, window])
    parts = snapshot["partitions"]
    n = len(parts)
    topic = np.array([p["topic"] for p in parts], dtype=object)
    pid = np.fromiter((p["partition"] for p in parts), dtype=np.int32, count=n)
    reps = [np.asarray(p["replicas"], dtype=np.int32) for p in parts]
    rf = np.fromiter((len(r) for r in reps), dtype=np.int32, count=n)
    leader = np.fromiter((p["leader"] for p in parts), dtype=np.int32, count=n)
    bin0 = np.fromiter((p["bytes_in"] for p in parts), dtype=np.float64, count=n)
    bout0 = np.fromiter((p["bytes_out"] for p in parts), dtype=np.float64, count=n)
    size = np.fromiter((p["size"] for p in parts), dtype=np.float64, count=n)

    def jitter(v):
        return v * np.maximum(0.0, 1.0 + rng.normal(0.0, noise, len(v))) if noise else v.copy()

    bytes_in, bytes_out = jitter(bin0), jitter(bout0)
    ws, we = T0 + pd.Timedelta(minutes=window), T0 + pd.Timedelta(minutes=window + 5)
    cluster = snapshot["cluster"]
    order = rng.permutation(n)
    prows = pd.DataFrame(
        {
            "cluster": pd.Series([cluster] * n, dtype="str"),
            "window_start": pd.Series(np.full(n, ws.to_datetime64(), dtype="datetime64[ns]")),
            "window_end": pd.Series(np.full(n, we.to_datetime64(), dtype="datetime64[ns]")),
            "topic": pd.Series(topic[order], dtype="str"),
            "partition": pid[order],
            "leader": leader[order],
            "replicas": pd.Series([reps[i] for i in order.tolist()], dtype=object),
            "replication_factor": rf[order],
            "bytes_in": bytes_in[order],
            "bytes_out": bytes_out[order],
            "messages_in": bytes_in[order] / 200.0,
            "size": size[order],
            "samples": (rf[order] * 5).astype(np.int64),
            "reporting_replicas": rf[order],
        }
    )
    # broker_load: Cruise Control's model over the same partitions, joined with capacity reports.
    brokers = sorted(snapshot["brokers"], key=lambda b: b["id"])
    nb = len(brokers)
    index = {b["id"]: k for k, b in enumerate(brokers)}
    flat = np.array([index[int(b)] for r in reps for b in r.tolist()], dtype=np.int64)
    per = np.repeat(np.arange(n), rf)
    lead_ix = np.array([index[int(b)] for b in leader.tolist()], dtype=np.int64)
    net_in = np.bincount(flat, weights=bytes_in[per], minlength=nb)
    net_out = np.bincount(lead_ix, weights=bytes_out + bytes_in * (rf - 1), minlength=nb)
    disk = np.bincount(flat, weights=size[per], minlength=nb)
    cap = {
        k: np.array([b["capacity"][k] for b in brokers], dtype=np.float64)
        for k in ("network_in", "network_out", "disk")
    }
    brows = (
        pd.DataFrame(
            {
                "cluster": pd.Series([cluster] * nb, dtype="str"),
                "window_start": pd.Series(np.full(nb, ws.to_datetime64(), dtype="datetime64[ns]")),
                "window_end": pd.Series(np.full(nb, we.to_datetime64(), dtype="datetime64[ns]")),
                "broker": np.array([b["id"] for b in brokers], dtype=np.int32),
                "rack": pd.Series([b.get("rack") for b in brokers], dtype="str"),
                "network_in": net_in,
                "network_out": net_out,
                "disk": disk,
                "replicas": np.bincount(flat, minlength=nb).astype(np.int32),
                "leaders": np.bincount(lead_ix, minlength=nb).astype(np.int32),
                "capacity_network_in": cap["network_in"],
                "capacity_network_out": cap["network_out"],
                "capacity_disk": cap["disk"],
                "util_network_in": net_in / cap["network_in"],
                "util_network_out": net_out / cap["network_out"],
                "util_disk": disk / cap["disk"],
                "cpu": np.full(nb, 0.4),
                "samples": np.full(nb, 5, dtype=np.int64),
                "_blocked": pd.Series([None] * nb, dtype="str"),
            }
        )
        .iloc[rng.permutation(nb)]
        .reset_index(drop=True)
    )
    return (cluster, ws, we), prows, brows


# -- stages ----------------------------------------------------------------------------------


def run_stages(
    path: str, key, prows, brows, balancer, profile: str | None, end_to_end: bool = True
) -> tuple[dict, dict, list]:
    """Times each stage of ``plan_group`` on one window; returns (seconds, peak MB, actions)."""
    from balancer.planner import ClusterModel, PlannerOptions
    from balancer.snapshot import build_snapshot, frame_records
    from balancer.spark.plan import planning

    seconds: dict[str, float] = {}
    peaks: dict[str, float] = {}
    prof = cProfile.Profile() if profile else None
    options = PlannerOptions.from_config(balancer)

    def stage(name, fn):
        if prof and profile == name:
            prof.enable()
        t = time.process_time()
        out = fn()
        seconds[name] = time.process_time() - t
        if prof and profile == name:
            prof.disable()
        peaks[name] = peak_mb()
        return out

    cluster = key[0]
    if path == "dict":
        parts, brks = stage(
            "frames", lambda: (frame_records(prows), frame_records(brows.drop(columns=["_blocked"])))
        )
        built = stage("snapshot", lambda: build_snapshot(cluster, parts, brks))
        del parts, brks
    else:
        from balancer.snapshot import build_snapshot_frames

        brks = stage("frames", lambda: brows.drop(columns=["_blocked"]))
        built = stage("snapshot", lambda: build_snapshot_frames(cluster, prows, brks))
    assert not built.problems, built.problems
    model = stage("model", lambda: ClusterModel(built.snapshot, options))

    def goals():
        # plan() itself on the model just built (its ClusterModel call handed the prebuilt one):
        # whatever plan() does (goal order, sweeps), without building the model twice.
        import balancer.planner as planner_pkg

        planner_pkg.ClusterModel = lambda snapshot, options=None: model
        try:
            return planner_pkg.plan(built.snapshot, options)
        finally:
            planner_pkg.ClusterModel = ClusterModel

    result = stage("goals", goals)
    fill_row = getattr(planning, "_fill_row", None)
    if fill_row is None:
        row = stage("rows", lambda: _legacy_fill_row({}, result))
    elif len(inspect.signature(fill_row).parameters) == 4:  # the row's verdict and advice need the snapshot
        row = stage("rows", lambda: fill_row({}, built.snapshot, result, options))
    else:
        row = stage("rows", lambda: fill_row({}, result))
    model = built = None  # free them before the end-to-end run
    # End to end: the real plan_group (frames -> columns), or for the dict path the original
    # plan_group (records -> dict snapshot -> model), which is what the job ran before.
    if not end_to_end:
        pass
    elif path == "dict":
        end = stage("plan_group", lambda: _legacy_plan_group(planning, key, prows, brows, balancer))
        assert end["actions"][0] == row["actions"], "plan_group differs from the staged run"
    else:
        end = stage("plan_group", lambda: planning.plan_group(key, prows, brows, balancer))
        assert end["actions"][0] == row["actions"], "plan_group differs from the staged run"
    if prof:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(30)
        print(out.getvalue(), file=sys.stderr)
    summary = {
        "status": row["status"],
        "imbalance_before": row["imbalance_before"],
        "imbalance_after": row["imbalance_after"],
        "leader_moves": row["leader_moves"],
        "replica_moves": row["replica_moves"],
        "bytes_to_move": row["bytes_to_move"],
        "goals": {g.goal: g.moves for g in result.goals if g.moves},
    }
    return seconds, peaks, [summary, row["actions"]]


def _legacy_plan_group(planning, key, partition_rows, broker_rows, balancer) -> pd.DataFrame:
    """plan_group with every row a dict, then build_snapshot, then plan (the path before the frames path)."""
    from balancer.snapshot import frame_records

    cluster, window_start, window_end = key
    reasons = [r for r in broker_rows.get("_blocked", pd.Series(dtype=object)).dropna().unique()]
    row = planning.plan_window(
        cluster,
        window_start,
        window_end,
        frame_records(partition_rows),
        frame_records(broker_rows.drop(columns=["_blocked"], errors="ignore")),
        balancer,
        blocked_reason="; ".join(sorted(reasons)) or None,
    )
    return pd.DataFrame([row], columns=planning.PLAN_RESULT_SCHEMA.names)


def _legacy_fill_row(row: dict, result) -> dict:
    """The balance_plans fields plan_window fills from a plan (for a checkout without ``_fill_row``)."""
    election = result.to_election()
    row.update(
        status="proposed" if result.actions else "balanced",
        imbalance_before=result.imbalance_before,
        imbalance_after=result.imbalance_after,
        bytes_to_move=int(result.bytes_to_move),
        leader_moves=int(result.leader_moves),
        replica_moves=int(result.replica_moves),
        reassignment_json=json.dumps(result.to_reassignment()) if result.actions else None,
        election_json=json.dumps(election) if election["partitions"] else None,
        actions=[
            {
                "seq": seq,
                "action": a.kind,
                "topic": a.topic,
                "partition": a.partition,
                "old_replicas": list(a.old_replicas),
                "new_replicas": list(a.new_replicas),
                "old_leader": a.old_leader,
                "new_leader": a.new_leader,
                "bytes_to_move": int(a.bytes_to_move),
            }
            for seq, a in enumerate(result.actions)
        ],
    )
    return row


def child(args) -> dict:
    from balancer.config import load_config
    from balancer.demo.scenarios import ScenarioSpec, generate

    balancer = load_config().balancer
    spec = ScenarioSpec(**(QUICK if args.quick else FULL))
    t = time.perf_counter()
    snapshot = generate(spec)
    frames = cluster_frames(snapshot, noise=args.noise, seed=args.seed, window=0)
    n_replicas = sum(len(p["replicas"]) for p in snapshot["partitions"])
    setup = time.perf_counter() - t
    base_mb = peak_mb()
    windows = []
    for w in range(args.windows):
        key, prows, brows = frames
        seconds, peaks, (summary, actions) = run_stages(
            args.path, key, prows, brows, balancer, args.profile if w == 0 else None, end_to_end=w == 0
        )
        windows.append(
            {
                "window": w,
                "seconds": seconds,
                "peak_mb": peaks,
                **summary,
                "actions_digest": _digest(actions),
                "loadavg": loadavg(),
            }
        )
        if args.executed:  # the executor carried the plan out before the next window was measured
            snapshot = _executed(snapshot, actions)
        if w + 1 < args.windows:
            frames = None  # free the old frames first
            frames = cluster_frames(snapshot, noise=args.noise, seed=args.seed, window=w + 1)
    return {
        "path": args.path,
        "executed": args.executed,
        "replicas": n_replicas,
        "partitions": len(prows),
        "brokers": len(brows),
        "setup_s": setup,
        "frames_mb": base_mb,
        "windows": windows,
    }


def _executed(snapshot: dict, actions: list[dict]) -> dict:
    """``snapshot`` after the plan's actions (new replicas, new leader), loads unchanged."""
    changed = {(a["topic"], a["partition"]): a for a in actions}
    parts = []
    for p in snapshot["partitions"]:
        a = changed.get((p["topic"], p["partition"]))
        parts.append(
            p if a is None else {**p, "replicas": list(a["new_replicas"]), "leader": a["new_leader"]}
        )
    return {**snapshot, "partitions": parts}


def _digest(actions: list[dict]) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(actions, sort_keys=True, default=str).encode()).hexdigest()[:16]


STAGES = ("frames", "snapshot", "model", "goals", "rows", "plan_group")


def print_report(rep: dict) -> None:
    print(
        f"path={rep['path']}{' (plans executed between windows)' if rep['executed'] else ''}: "
        f"{rep['brokers']} brokers, {rep['partitions']:,} partitions, {rep['replicas']:,} replicas (cluster "
        f"+ frames built in {rep['setup_s']:.1f} s, {rep['frames_mb']:.0f} MB)"
    )
    head = (
        f"{'window':>6} " + " ".join(f"{s:>10}" for s in STAGES) + f" {'peak MB':>8} {'imbalance':>13} "
        f"{'lead':>5} {'repl':>5} {'digest':>16}  load avg"
    )
    print(head)
    for w in rep["windows"]:
        s = w["seconds"]
        print(
            f"{w['window']:>6} "
            + " ".join(f"{s[k]:>10.2f}" if k in s else f"{'-':>10}" for k in STAGES)
            + f" {max(w['peak_mb'].values()):>8.0f} "
            f"{w['imbalance_before']:>5.3f}->{w['imbalance_after']:<6.3f} "
            f"{w['leader_moves']:>5} {w['replica_moves']:>5} {w['actions_digest']:>16}  {w['loadavg']}"
        )
    print("  moves per goal (window 0):", rep["windows"][0]["goals"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 topics: ~128k replicas instead of 1.32M")
    parser.add_argument(
        "--path",
        choices=("dict", "columnar", "both"),
        default="both",
        help="dict: records -> snapshot dicts -> model (the CLI's path); columnar: frames -> arrays",
    )
    parser.add_argument("--windows", type=int, default=3, help="noisy re-measurements of the same cluster")
    parser.add_argument("--noise", type=float, default=0.03)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--executed",
        action="store_true",
        help="carry each window's plan out before the next window (the job with an executor)",
    )
    parser.add_argument("--profile", choices=STAGES, help="cProfile this stage of window 0 (to stderr)")
    parser.add_argument("--check", action="store_true", help="fail unless both paths give identical actions")
    parser.add_argument("--json", metavar="FILE", help="also write the raw figures as JSON")
    parser.add_argument(
        "--root", help="import balancer from this checkout instead (e.g. a worktree of an older commit)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return 0
    print(f"load average before: {loadavg()}; code from {args.root or 'the installed balancer package'}")
    # The children import balancer from --root's checkout when given (PYTHONPATH precedes site-packages).
    env = {**os.environ, "PYTHONPATH": str(Path(args.root).resolve())} if args.root else None
    paths = ("dict", "columnar") if args.path == "both" else (args.path,)
    reports = []
    for path in paths:
        cmd = [
            sys.executable,
            __file__,
            "--child",
            "--path",
            path,
            "--windows",
            str(args.windows),
            "--noise",
            str(args.noise),
            "--seed",
            str(args.seed),
        ]
        cmd += ["--quick"] if args.quick else []
        cmd += ["--executed"] if args.executed else []
        cmd += ["--profile", args.profile] if args.profile else []
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env)
        if proc.returncode != 0:
            print(f"path {path}: child failed", file=sys.stderr)
            return 1
        rep = json.loads(proc.stdout.strip().splitlines()[-1])
        reports.append(rep)
        print_report(rep)
    if args.json:
        Path(args.json).write_text(json.dumps(reports, indent=2))
    if args.check and len(reports) == 2:
        same = [
            a["actions_digest"] == b["actions_digest"]
            for a, b in zip(reports[0]["windows"], reports[1]["windows"])
        ]
        print("identical actions on every window:", all(same))
        return 0 if all(same) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
