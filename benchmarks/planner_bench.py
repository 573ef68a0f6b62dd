"""Planner benchmark: seeded scenarios, the planner side by side with two baselines.

    .venv/bin/python benchmarks/planner_bench.py [--quick] [--only NAME ...]

Each scenario runs in its own subprocess so its peak memory (ru_maxrss: snapshot generation +
planning, measured before the baselines run) is its own. Exits non-zero if any plan or
baseline assignment is invalid. Baselines: benchmarks/baselines.py.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

# name -> ScenarioSpec kwargs
SCENARIOS: dict[str, dict] = {
    "scale_out": dict(brokers=12, racks=3, topics=150, partitions_per_topic=(6, 48), new_empty_brokers=3, seed=101),
    "restarted": dict(brokers=9, racks=3, topics=120, partitions_per_topic=(6, 48), skew=0.5, restarted_broker=4, seed=102),
    "hot_partitions": dict(brokers=12, racks=0, topics=200, partitions_per_topic=(4, 40), skew=0.9, seed=103),
    "racks_uneven": dict(brokers=10, racks=4, topics=150, partitions_per_topic=(6, 48), seed=104),
    "heterogeneous": dict(brokers=12, racks=3, topics=150, partitions_per_topic=(6, 48), heterogeneous_capacity=True, seed=105),
    "scale_270": dict(brokers=270, racks=6, topics=3000, partitions_per_topic=(16, 272), total_bytes_in=5e9,
                      skew=1.2, seed=106),
}
QUICK_SKIP = {"scale_270"}
SCALE_TIME_LIMIT_S = 60.0
SCALE_MEMORY_LIMIT_MB = 4096.0


def run_one(name: str) -> dict:
    from baselines import count_balance, evaluate, kafka_generate

    from balancer.planner import plan
    from balancer.planner.validate import check_plan
    from balancer.scenarios import ScenarioSpec, generate

    spec = ScenarioSpec(**SCENARIOS[name])
    snapshot = generate(spec)
    started = time.perf_counter()
    result = plan(snapshot)
    seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    problems = check_plan(snapshot, result)
    total = result.total_bytes
    rows = [{
        "algo": "planner", "before": result.before, "after": result.after, "bound": result.lower_bound,
        "bytes_to_move": result.bytes_to_move, "share": result.bytes_to_move / total, "replica_moves": result.replica_moves,
        "leader_moves": result.leader_moves, "seconds": seconds, "peak_mb": peak_mb,
        "unsatisfied": list(result.unsatisfied),
    }]
    for algo, fn in (("kafka --generate", lambda s: kafka_generate(s, seed=spec.seed)), ("count-based", count_balance)):
        t0 = time.perf_counter()
        try:
            ev = evaluate(snapshot, *fn(snapshot))
        except AssertionError as exc:
            problems.append(f"{algo}: {exc}")
            continue
        rows.append({"algo": algo, "before": result.before, "bound": result.lower_bound, **ev,
                     "share": ev["bytes_to_move"] / total, "seconds": time.perf_counter() - t0, "peak_mb": None})
    replicas = sum(len(p["replicas"]) for p in snapshot["partitions"])
    return {"scenario": name, "brokers": len(snapshot["brokers"]), "replicas": replicas, "rows": rows,
            "problems": problems}


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.1f}{unit}"
        n /= 1000
    return str(n)


def verdict(report: dict) -> list[str]:
    """Target checks: traffic balance within 1.10 (or 2% of the bound), less data than both baselines."""
    notes = []
    ours = report["rows"][0]
    for r in ("network_in", "network_out"):
        limit = max(1.10, ours["bound"][r] * 1.02)
        if ours["after"][r] > limit + 1e-9:
            notes.append(f"{r} {ours['after'][r]:.3f} > target {limit:.3f}")
    for row in report["rows"][1:]:
        if ours["bytes_to_move"] > row["bytes_to_move"]:
            worst = max(row["after"]["network_in"], row["after"]["network_out"])
            notes.append(f"moves more data than {row['algo']} (which leaves network in/out at {worst:.3f})")
    return notes


def print_table(reports: list[dict]) -> None:
    head = (f"{'scenario':<15} {'algo':<17} {'net_in':>13} {'net_out':>13} {'disk':>13} {'bound i/o':>11} "
            f"{'moved':>16} {'repl':>6} {'lead':>6} {'time s':>7} {'peak MB':>8}")
    print(head)
    print("-" * len(head))
    for rep in reports:
        for i, row in enumerate(rep["rows"]):
            b, a = row["before"], row["after"]
            label = f"{rep['scenario']}" if i == 0 else ""
            peak = f"{row['peak_mb']:.0f}" if row["peak_mb"] else "-"
            print(f"{label:<15} {row['algo']:<17} {b['network_in']:>5.3f}->{a['network_in']:<6.3f} "
                  f"{b['network_out']:>5.3f}->{a['network_out']:<6.3f} {b['disk']:>5.3f}->{a['disk']:<6.3f} "
                  f"{row['bound']['network_in']:>5.2f}/{row['bound']['network_out']:<5.2f} "
                  f"{_fmt_bytes(row['bytes_to_move']):>8} {row['share']:>6.1%} {row['replica_moves']:>6} "
                  f"{row['leader_moves']:>6} {row['seconds']:>7.2f} {peak:>8}")
        notes = verdict(rep)
        extra = f"  [{rep['brokers']} brokers, {rep['replicas']} replicas]"
        print(f"{'':<15} targets: {'met' if not notes else '; '.join(notes)}{extra}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the 270-broker scale scenario")
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS), help="run just these scenarios")
    parser.add_argument("--child", choices=sorted(SCENARIOS), help=argparse.SUPPRESS)
    parser.add_argument("--json", metavar="FILE", help="also write the raw figures as JSON")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_one(args.child)))
        return 0
    names = args.only or [n for n in SCENARIOS if not (args.quick and n in QUICK_SKIP)]
    reports, failed = [], False
    for name in names:
        proc = subprocess.run([sys.executable, __file__, "--child", name], capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{name}: benchmark child failed:\n{proc.stderr}", file=sys.stderr)
            failed = True
            continue
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        reports.append(report)
        if report["problems"]:
            failed = True
            print(f"{name}: INVALID: " + "; ".join(report["problems"][:10]), file=sys.stderr)
        if name == "scale_270":
            ours = report["rows"][0]
            if ours["seconds"] > SCALE_TIME_LIMIT_S or ours["peak_mb"] > SCALE_MEMORY_LIMIT_MB:
                failed = True
                print(f"{name}: over budget: {ours['seconds']:.1f}s, {ours['peak_mb']:.0f} MB", file=sys.stderr)
    print_table(reports)
    if args.json:
        Path(args.json).write_text(json.dumps(reports, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
