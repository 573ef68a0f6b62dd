"""What a person sees: rankings and plans as terminal tables (output code kept apart from logic)."""

from __future__ import annotations

import json

from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table

from balancer.vocabulary import PlanStatus

MB = 1e6


def ranking_table(rows: list, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in (
        "broker",
        "traffic MB/s",
        "in MB/s",
        "out MB/s",
        "replicas",
        "leaders",
        "util",
        "rank by traffic",
        "rank by partitions",
        "hot",
    ):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            str(r["broker"]),
            f"{r['traffic'] / MB:,.1f}",
            f"{r['network_in'] / MB:,.1f}",
            f"{r['network_out'] / MB:,.1f}",
            str(r["replicas"]),
            str(r["leaders"]),
            f"{r['utilization']:.0%}" if r["utilization"] is not None else "?",
            str(r["rank_by_traffic"]),
            str(r["rank_by_partitions"]),
            "[red]HOT[/]" if r["is_hot"] else "",
        )
    return table


def plans_table(rows: list, executed: set[str] = frozenset()) -> Table:
    table = Table(
        title="Plans, one per finalized window (imbalance = max utilization / cluster utilization; "
        "after = predicted)",
        title_justify="left",
    )
    for column in (
        "window end",
        "status",
        "net in before→after",
        "net out before→after",
        "leader moves",
        "replica moves",
        "GB to move",
        "executed",
    ):
        table.add_column(column, no_wrap=True)
    table.add_column("reason", overflow="ellipsis", no_wrap=True, max_width=44)
    for r in rows:

        def pair(before, after):
            return "" if before is None else f"{before:.3f} → {after:.3f}"

        table.add_row(
            f"{r['window_end']:%H:%M}",
            r["status"],
            pair(r["network_in_before"], r["network_in_after"]),
            pair(r["network_out_before"], r["network_out_after"]),
            str(r["leader_moves"] or 0),
            str(r["replica_moves"] or 0),
            f"{(r['bytes_to_move'] or 0) / 1e9:,.1f}",
            "yes" if r["plan_id"] in executed else "",
            r["reason"] or "",
        )
    return table


def unmet_table(rows: list) -> Table:
    """Per window the planner ran on: the first goal outside its threshold (after the plan, if one
    was proposed), what binds it, and the method advice; ``balanced`` windows with their advice too."""
    table = Table(
        title="What is left, and why (goal outside its threshold after the plan; figure, threshold, the "
        "least any plan reaches)",
        title_justify="left",
    )
    for column in ("window end", "status", "goal", "figure", "threshold", "lower bound", "advice"):
        table.add_column(column, no_wrap=True)
    table.add_column("what binds it", overflow="fold", max_width=60)
    for r in rows:
        if r["status"] not in ("proposed", "balanced", "unbalanced"):
            continue
        number = "{:.3f}".format
        table.add_row(
            f"{r['window_end']:%H:%M}",
            r["status"],
            r["unmet_goal"] or "(none)",
            number(r["unmet_figure"]) if r["unmet_figure"] is not None else "",
            number(r["unmet_threshold"]) if r["unmet_threshold"] is not None else "",
            number(r["unmet_lower_bound"]) if r["unmet_lower_bound"] is not None else "",
            r["advice"] or "",
            r["binding"] or "every goal within its threshold",
        )
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
    console.print(quarantine_table(lakehouse))
    plans = lakehouse.read("balance_plans").orderBy("window_end").collect()
    console.print(plans_table(plans, executed=set(executed)))
    console.print(unmet_table(plans))
    carried = [p for p in plans if p["plan_id"] in executed]
    if not carried:
        return
    for plan in carried:
        console.print(lifecycle_table(lakehouse, plan))
        console.print(batches_table(lakehouse, plan))
        console.print(outcome_table(lakehouse, plan))
    measured = measured_imbalance(lakehouse)
    first, last = measured[0], measured[-1]
    console.print(
        f"[bold]network out imbalance {first['network_out']:.2f} → {last['network_out']:.2f}, "
        f"network in {first['network_in']:.2f} → {last['network_in']:.2f}[/] "
        f"(measured, first → last window) after {len(carried)} plan(s) carried out: "
        f"{sum(p['leader_moves'] for p in carried)} leadership transfers, "
        f"{sum(p['replica_moves'] for p in carried)} replica moves, "
        f"{sum(p['bytes_to_move'] for p in carried) / 1e6:,.1f} MB copied"
    )


def quarantine_table(lakehouse) -> Table:
    """Records the job set aside, by reason (the first words of it: the rest names offsets and values)."""
    rows = (
        lakehouse.read("telemetry_quarantine")
        .groupBy("reason")
        .agg(F.count("*").alias("records"), F.min("kafka_offset").alias("first_offset"))
        .orderBy("reason")
        .collect()
    )
    table = Table(title=f"Quarantined: {sum(r['records'] for r in rows)} record(s), the stream went on")
    for column in ("reason", "records", "first offset"):
        table.add_column(column, justify="left" if column == "reason" else "right")
    for row in rows:
        table.add_row(row["reason"][:100], str(row["records"]), str(row["first_offset"]))
    return table


def measured_imbalance(lakehouse) -> list:
    """Per window, from broker_load: max utilization / cluster utilization, network in and out."""
    loads = lakehouse.read("broker_load")
    return (
        loads.groupBy("cluster", "window_end")
        .agg(
            *[
                (F.max(f"util_{r}") / (F.sum(r) / F.sum(f"capacity_{r}"))).alias(r)
                for r in ("network_in", "network_out")
            ]
        )
        .orderBy("window_end")
        .collect()
    )


def lifecycle_table(lakehouse, plan) -> Table:
    """The plan as the job followed it in the telemetry (plan_events)."""
    table = Table(
        title=f"Plan {plan['plan_id'][:8]} (window ending {plan['window_end']:%H:%M}), followed in the "
        "telemetry",
        title_justify="left",
    )
    for column in ("window end", "status", "actions done", "MB done"):
        table.add_column(column)
    table.add_column("detail", overflow="ellipsis", no_wrap=True, max_width=90)
    actions = lakehouse.read("plan_actions").where(F.col("plan_id") == plan["plan_id"]).count()
    table.add_row(f"{plan['window_end']:%H:%M}", PlanStatus.PROPOSED.value, f"0/{actions}", "0.0", "")
    for e in (
        lakehouse.read("plan_events")
        .where(F.col("plan_id") == plan["plan_id"])
        .orderBy("window_end")
        .collect()
    ):
        table.add_row(
            f"{e['window_end']:%H:%M}",
            e["status"],
            f"{e['actions_done']}/{e['actions_total']}",
            f"{(e['bytes_done'] or 0) / MB:,.1f}",
            e["detail"] or "",
        )
    return table


def batches_table(lakehouse, plan) -> Table:
    """How it was carried out: plan_batches, with the computed throttles."""
    table = Table(
        title="Its batches: leadership first, then replica moves within the executor's limits, "
        "each at its computed throttle",
        title_justify="left",
    )
    for column in (
        "batch",
        "kind",
        "actions",
        "MB to move",
        "throttle MB/s (min-max over brokers)",
        "estimated s",
        "meets deadline",
    ):
        table.add_column(column, justify="right")
    for b in (
        lakehouse.read("plan_batches").where(F.col("plan_id") == plan["plan_id"]).orderBy("batch").collect()
    ):
        rates = sorted(json.loads(b["throttle"]).values()) if b["throttle"] else []
        table.add_row(
            str(b["batch"]),
            b["kind"],
            str(b["actions"]),
            f"{(b['bytes_to_move'] or 0) / MB:,.1f}",
            f"{rates[0] / MB:,.2f}-{rates[-1] / MB:,.2f}" if rates else "",
            f"{b['estimated_seconds']:,.0f}" if b["estimated_seconds"] is not None else "",
            "" if b["meets_deadline"] is None else ("yes" if b["meets_deadline"] else "[red]no[/]"),
        )
    return table


def outcome_table(lakehouse, plan) -> Table:
    """Predicted vs realized (plan_outcomes), the cluster's figures and the brokers furthest off."""
    rows = lakehouse.read("plan_outcomes").where(F.col("plan_id") == plan["plan_id"]).collect()
    when = f" (window ending {rows[0]['window_end']:%H:%M})" if rows else ": not measured yet"
    table = Table(
        title=f"Predicted vs realized, first full window after completion{when}; "
        "utilization / cluster utilization",
        title_justify="left",
    )
    for column in ("resource", "broker", "before", "predicted", "realized", "traffic change"):
        table.add_column(column, justify="right")

    def fmt(value):
        return "" if value is None else f"{value:.3f}"

    for r in sorted(rows, key=lambda r: (r["resource"], r["broker"] is not None, r["broker"] or 0)):
        if r["broker"] is not None and r["resource"] != "network_out":
            continue  # per broker: network out only, to keep the table short
        table.add_row(
            r["resource"],
            "cluster" if r["broker"] is None else str(r["broker"]),
            fmt(r["before"]),
            fmt(r["predicted"]),
            fmt(r["realized"]),
            "" if r["traffic_change"] is None else f"{r['traffic_change']:+.1%}",
        )
    return table
