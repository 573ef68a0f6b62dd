"""What a person sees: rankings and plans as terminal tables (output code kept apart from logic)."""

from __future__ import annotations

from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table


MB = 1e6


def ranking_table(rows: list, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("broker", "traffic MB/s", "in MB/s", "out MB/s", "replicas", "leaders", "util",
                   "rank by traffic", "rank by partitions", "hot"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(str(r["broker"]), f"{r['traffic'] / MB:,.1f}", f"{r['network_in'] / MB:,.1f}",
                      f"{r['network_out'] / MB:,.1f}", str(r["replicas"]), str(r["leaders"]),
                      f"{r['utilization']:.0%}" if r["utilization"] is not None else "?",
                      str(r["rank_by_traffic"]), str(r["rank_by_partitions"]),
                      "[red]HOT[/]" if r["is_hot"] else "")
    return table


def plans_table(rows: list, executed: set[str] = frozenset()) -> Table:
    table = Table(title="Plans, one per finalized window (imbalance = max utilization / cluster utilization; "
                        "after = predicted)", title_justify="left")
    for column in ("window end", "status", "net in before→after", "net out before→after", "leader moves",
                   "replica moves", "GB to move", "executed", "reason"):
        table.add_column(column)
    for r in rows:
        def pair(before, after):
            return "" if before is None else f"{before:.3f} → {after:.3f}"
        table.add_row(f"{r['window_end']:%H:%M}", r["status"], pair(r["network_in_before"], r["network_in_after"]),
                      pair(r["network_out_before"], r["network_out_after"]), str(r["leader_moves"] or 0),
                      str(r["replica_moves"] or 0), f"{(r['bytes_to_move'] or 0) / 1e9:,.1f}",
                      "yes" if r["plan_id"] in executed else "", r["reason"] or "")
    return table


def print_demo_report(console: Console, lakehouse, *, executed: list[str]) -> None:
    ranking = lakehouse.read("broker_ranking")
    windows = [r[0] for r in ranking.select("window_end").distinct().orderBy("window_end").collect()]
    console.rule("Hot brokers: by traffic, not by partition count")
    if not windows:
        console.print("[yellow]no window was finalized[/]")
        return
    for label, window_end in (("first window", windows[0]), ("last window", windows[-1])):
        rows = ranking.where(F.col("window_end") == window_end).orderBy("rank_by_traffic").collect()
        console.print(ranking_table(rows, f"{label} (ends {window_end:%H:%M} simulated time)"))
    plans = lakehouse.read("balance_plans").orderBy("window_end").collect()
    console.print(plans_table(plans, executed=set(executed)))
    carried = [p for p in plans if p["plan_id"] in executed]
    if carried:
        first, last = plans[0], plans[-1]
        console.print(
            f"[bold]network out imbalance {first['network_out_before']:.2f} → {last['network_out_before']:.2f}, "
            f"network in {first['network_in_before']:.2f} → {last['network_in_before']:.2f}[/] "
            f"(measured, first → last window) after {len(carried)} plan(s) carried out: "
            f"{sum(p['leader_moves'] for p in carried)} leadership transfers, "
            f"{sum(p['replica_moves'] for p in carried)} replica moves, "
            f"{sum(p['bytes_to_move'] for p in carried) / 1e9:,.1f} GB copied")
