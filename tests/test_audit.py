"""Audit: every table keeps its Delta history (retention set by default, from lakehouse.retention),
and `balancer history` answers what the job had committed when it made a plan."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from balancer.cli.main import main as balancer_cli
from balancer.config import ConfigError, load_config
from balancer.spark.lakehouse import TABLES, Lakehouse, arrow_schema

WINDOW = datetime(2026, 11, 24, 3, 10, tzinfo=UTC)
AUDIT = {
    "delta.logRetentionDuration": "interval 365 days",
    "delta.deletedFileRetentionDuration": "interval 365 days",
}


def append(root, table: str, *rows: dict) -> int:
    """Commit ``rows`` (by column name; absent columns null) to ``table``; the new version."""
    write_deltalake(
        str(root / table), pa.Table.from_pylist(list(rows), schema=arrow_schema(table)), mode="append"
    )
    time.sleep(0.02)  # distinct commit times (Delta's resolution is a millisecond)
    return DeltaTable(str(root / table)).version()


def plan(plan_id: str) -> dict:
    return {"plan_id": plan_id, "cluster": "c1", "status": "proposed", "window_end": WINDOW}


def load(broker: int) -> dict:
    return {"cluster": "c1", "window_start": WINDOW, "window_end": WINDOW, "broker": broker}


@pytest.mark.integration
def test_tables_keep_audit_history_by_default_and_as_configured(spark, tmp_path):
    lakehouse = Lakehouse(spark, tmp_path / "lh", engine="delta-rs")
    lakehouse.create_all()
    for table in TABLES:
        assert DeltaTable(str(tmp_path / "lh" / table)).metadata().configuration == AUDIT, table

    config = load_config(None, [f"lakehouse.path={tmp_path / 'lh'}", "lakehouse.retention.log_days=400"])
    wanted = config.lakehouse.retention.table_properties()
    lakehouse.create_all(wanted)  # existing tables get the configured properties
    versions = {}
    for table in TABLES:
        delta = DeltaTable(str(tmp_path / "lh" / table))
        assert delta.metadata().configuration == {**AUDIT, "delta.logRetentionDuration": "interval 400 days"}
        versions[table] = delta.version()
    lakehouse.create_all(wanted)  # nothing to change: no commit
    assert {t: DeltaTable(str(tmp_path / "lh" / t)).version() for t in TABLES} == versions


def test_retention_below_deltas_floor_is_rejected_naming_the_key():
    with pytest.raises(ConfigError, match=r"lakehouse\.retention\.deleted_files_days"):
        load_config(None, ["lakehouse.retention.deleted_files_days=1"])
    with pytest.raises(ConfigError, match=r"lakehouse\.retention\.log_days"):
        load_config(None, ["lakehouse.retention.log_days=forever"])


def test_history_names_the_plans_commit_and_what_every_table_held_then(tmp_path, capsys):
    root = tmp_path / "lh"
    for table in ("balance_plans", "broker_load", "plan_actions"):
        DeltaTable.create(str(root / table), schema=arrow_schema(table), name=table)
    append(root, "broker_load", load(1), load(2))
    append(root, "balance_plans", plan("a"))
    loads_then = append(root, "broker_load", load(3))
    made = append(root, "balance_plans", plan("b"))
    action = {"plan_id": "b", "cluster": "c1", "seq": 0, "action": "leadership", "topic": "t", "partition": 0}
    actions = append(root, "plan_actions", action)  # the plan's actions land right after the plan
    append(root, "broker_load", load(4))
    append(root, "balance_plans", plan("c"))

    settings = ["--set", f"lakehouse.path={root}"]
    assert balancer_cli(["history", *settings, "--plan", "b"]) == 0
    out = capsys.readouterr().out
    head = re.search(r"plan b: committed to balance_plans in version (\d+) at (\S+)", out)
    assert head and int(head.group(1)) == made, out
    assert re.search(rf"broker_load\s+version {loads_then}, 3 rows", out), out
    assert re.search(rf"balance_plans\s+version {made}, 2 rows", out), out
    assert re.search(
        rf"plan_actions\s+version 0, 0 rows; the plan's own rows from version {actions} at ", out
    )
    assert "telemetry_raw" not in out  # not in this lakehouse: not listed
    at = head.group(2)
    assert f"balancer sql --set lakehouse.path={root} --as-of {at} " in out.splitlines()[-1]

    # The printed time reads the tables as they were: plan b and its loads, nothing committed later.
    from balancer.cli.sql import as_of
    from balancer.delta_versions import version_at

    plans = DeltaTable(
        str(root / "balance_plans"), version=version_at(str(root / "balance_plans"), as_of(at))
    )
    assert sorted(plans.to_pyarrow_table()["plan_id"].to_pylist()) == ["a", "b"]

    assert balancer_cli(["history", *settings, "balance_plans"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert [int(r[0]) for r in rows] == [made + 1, made, made - 1, 0]
    assert [r[2] for r in rows[:3]] == ["1", "1", "1"] and rows[-1][-2:] == ["CREATE", "TABLE"]

    assert balancer_cli(["history", *settings, "--plan", "nope"]) == 2
    assert (
        capsys.readouterr().err.strip() == f"balancer history: plan nope is not in balance_plans under {root}"
    )
    assert balancer_cli(["history", *settings, "plans"]) == 2
    assert "unknown table 'plans'" in capsys.readouterr().err
    assert balancer_cli(["history", *settings, "telemetry_raw"]) == 2
    shown = capsys.readouterr()
    assert (
        shown.out == ""
        and shown.err.strip() == f"balancer history: no Delta table telemetry_raw under {root}"
    )


def test_a_commits_printed_time_reads_that_commit_when_its_log_file_was_written_later(tmp_path):
    """A slow writer's log file is modified after the time its commit records; Delta's own time travel goes
    by the file's time, so "as of" the printed commit time would read the version before it."""
    import os

    from balancer.cli.history import plan_commit, tables_at
    from balancer.delta_versions import version_at
    from balancer.storage import Storage

    root = tmp_path / "lh"
    DeltaTable.create(str(root / "balance_plans"), schema=arrow_schema("balance_plans"), name="balance_plans")
    append(root, "balance_plans", plan("a"))
    made = append(root, "balance_plans", plan("b"))
    log = root / "balance_plans" / "_delta_log" / f"{made:020d}.json"
    later = log.stat().st_mtime + 30
    os.utime(log, (later, later))

    commit = plan_commit(Storage.of(root), "b")
    assert commit is not None and commit.version == made
    assert version_at(str(root / "balance_plans"), commit.at) == made
    assert dict((t, v) for t, v, _ in tables_at(Storage.of(root), commit.at))["balance_plans"] == made


# -- balancer sql --as-of VERSION: a version is a table's own ----------------------------------------------


def test_a_query_reads_the_tables_it_names_and_those_of_the_views_it_names():
    from balancer.cli.sql import tables_read

    assert tables_read("SELECT count(*) FROM balance_plans", TABLES) == ["balance_plans"]
    assert tables_read("select * from PLAN_HISTORY", TABLES) == ["balance_plans"]  # a saved view
    joined = "SELECT * FROM broker_load b JOIN balance_plans p USING (cluster, window_end)"
    assert tables_read(joined, TABLES) == ["balance_plans", "broker_load"]
    assert tables_read("SELECT 41 + 1", TABLES) == []


def test_a_bare_version_is_refused_for_a_query_reading_several_tables(tmp_path, capsys):
    query = "SELECT * FROM broker_load JOIN balance_plans USING (cluster, window_end)"
    settings = ["--set", f"lakehouse.path={tmp_path / 'lh'}"]
    assert balancer_cli(["sql", *settings, "--as-of", "1", query]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("balancer sql: --as-of 1 is a version of one table") and "\n" not in err
    assert "reads 2: balance_plans, broker_load" in err and "--as-of 2026-11-24T03:10:00Z" in err


@pytest.mark.integration
def test_a_version_applies_to_the_one_table_the_query_reads(spark, tmp_path, capsys):
    """Version 2 of balance_plans, while broker_load, which the query does not read, has no version 2."""
    root = tmp_path / "lh"
    for table in ("balance_plans", "broker_load"):
        DeltaTable.create(str(root / table), schema=arrow_schema(table), name=table)
    append(root, "broker_load", load(1))
    for plan_id in ("a", "b", "c"):
        append(root, "balance_plans", plan(plan_id))
    settings = ["--set", f"lakehouse.path={root}", "--set", "lakehouse.engine=delta-rs"]
    query = "SELECT concat_ws(',', sort_array(collect_list(plan_id))) AS plans FROM plan_history"
    assert balancer_cli(["sql", *settings, "--as-of", "2", query]) == 0
    assert "|a,b  |" in capsys.readouterr().out  # versions 1 and 2 added a and b
