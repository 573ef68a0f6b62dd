"""What the notebooks in ``notebooks/`` share: where the lakehouse is, its tables read with delta-rs into
pandas (no Spark), and altair charts that display as PNG images, so a saved notebook shows them on a
code host, in an editor or in JupyterLab without a Vega renderer.

Where the lakehouse is, one rule for every notebook: ``BALANCER_CONFIG`` names the job's config file
(default ``conf/local.yaml``, the one ``make run`` uses); its ``lakehouse.path`` and
``lakehouse.storage_options`` say where and how to read. ``BALANCER_LAKEHOUSE`` overrides the path
only. A relative local path is relative to the repository root, where ``make run`` writes it.

The frame helpers below are pure pandas: the notebooks keep only the question and the chart.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from balancer.config import REPO_ROOT, load_config
from balancer.storage import Storage, is_uri
from balancer.vocabulary import PlanStatus

ENV_CONFIG = "BALANCER_CONFIG"
ENV_LAKEHOUSE = "BALANCER_LAKEHOUSE"
LOCAL_CONFIG = REPO_ROOT / "conf" / "local.yaml"
# Charts are images: one scale for every notebook keeps a saved notebook's size predictable.
PNG_SCALE = 1.0


def lakehouse(environ: Mapping[str, str] = os.environ) -> Storage:
    """The lakehouse the notebooks read: see the module docstring for the rule."""
    config = load_config(environ.get(ENV_CONFIG) or LOCAL_CONFIG)
    root = environ.get(ENV_LAKEHOUSE) or config.lakehouse.path
    if not is_uri(root) and not Path(root).is_absolute():
        root = str(REPO_ROOT / root)
    return Storage.of(root, config.lakehouse.storage_options)


class MissingLakehouseError(LookupError):
    """No lakehouse (or not the job's) where the notebooks were pointed."""


def read_table(storage: Storage, name: str, columns: list[str] | None = None) -> pd.DataFrame:
    """Table ``name`` as a pandas frame (timestamps in UTC); a missing table names the fix."""
    from deltalake import DeltaTable

    path = storage.join(name)
    options = storage.delta_options()
    if not DeltaTable.is_deltatable(path, storage_options=options):
        raise MissingLakehouseError(
            f"no Delta table {name!r} under {storage.root}: run `make run` first, or point "
            f"{ENV_LAKEHOUSE} / {ENV_CONFIG} at the job's lakehouse"
        )
    return DeltaTable(path, storage_options=options).to_pandas(columns=columns)


def static_charts(scale: float = PNG_SCALE) -> None:
    """Display every altair chart as a PNG image (vl-convert) with a short text form."""
    import altair as alt
    import vl_convert

    def render(spec: dict, **_) -> dict:
        png = vl_convert.vegalite_to_png(spec, scale=scale)
        return {"image/png": png, "text/plain": "<altair chart, shown as a PNG image>"}

    alt.renderers.register("balancer-png", render)
    alt.renderers.enable("balancer-png")
    # A chart's data travels inside its spec: frames here are summaries, never raw telemetry.
    alt.data_transformers.disable_max_rows()


def time_x(field: str = "window_end", title: str = "window end (UTC)"):
    """An altair x encoding for a timestamp column, in UTC whatever the machine's time zone."""
    import altair as alt

    return alt.X(f"{field}:T", title=title, scale=alt.Scale(type="utc"), axis=alt.Axis(format="%m-%d %H:%M"))


def reason_kind(reason: pd.Series) -> pd.Series:
    """A quarantine reason without its particulars (the part after the first ``": "``), as the
    ``quarantine_reasons`` view groups them."""
    return reason.fillna("").str.replace(r": .*$", "", regex=True)


def quarantine_over_time(quarantine: pd.DataFrame, freq: str = "1min") -> pd.DataFrame:
    """Records quarantined per reason kind and ``freq`` bucket of ``quarantined_at``:
    columns ``at``, ``reason_kind``, ``records``."""
    if quarantine.empty:
        return pd.DataFrame({"at": pd.Series(dtype="datetime64[us, UTC]"), "reason_kind": [], "records": []})
    frame = pd.DataFrame(
        {"at": quarantine["quarantined_at"].dt.floor(freq), "reason_kind": reason_kind(quarantine["reason"])}
    )
    return frame.groupby(["at", "reason_kind"]).size().rename("records").reset_index()


def broker_coverage(broker_load: pd.DataFrame) -> pd.DataFrame:
    """Per cluster, window and broker: ``samples`` (capacity reports) relative to the best-reporting
    broker of the same window (the data contract's ``coverage``), and brokers seen in the cluster in
    any window that did not report in this one (``coverage`` 0). Columns ``cluster``,
    ``window_end``, ``broker``, ``samples``, ``coverage``."""
    keys = ["cluster", "window_end"]
    seen = broker_load[keys + ["broker", "samples"]]
    every = seen[keys].drop_duplicates().merge(seen[["cluster", "broker"]].drop_duplicates(), on="cluster")
    frame = every.merge(seen, on=keys + ["broker"], how="left")
    frame["samples"] = frame["samples"].fillna(0).astype("int64")
    best = frame.groupby(keys)["samples"].transform("max")
    frame["coverage"] = (frame["samples"] / best.where(best > 0)).fillna(0.0)
    return frame.sort_values(keys + ["broker"]).reset_index(drop=True)


def placement_changes(partition_load: pd.DataFrame) -> pd.DataFrame:
    """Per cluster and window: partitions whose replica list (``moved``) or leader (``new_leader``,
    replicas unchanged) differs from the cluster's previous window, as the telemetry reported them.
    The first window of a cluster has no previous one and is left out."""
    frame = partition_load[["cluster", "window_end", "topic", "partition", "leader", "replicas"]].copy()
    frame["replicas"] = frame["replicas"].map(lambda r: tuple(r) if r is not None else ())
    frame = frame.sort_values(["cluster", "topic", "partition", "window_end"])
    previous = frame.groupby(["cluster", "topic", "partition"])[["replicas", "leader"]].shift()
    frame = frame[previous["replicas"].notna()]
    previous = previous.loc[frame.index]
    moved = frame["replicas"] != previous["replicas"]
    new_leader = ~moved & (frame["leader"] != previous["leader"])
    counts = (
        frame.assign(moved=moved, new_leader=new_leader)
        .groupby(["cluster", "window_end"])[["moved", "new_leader"]]
        .sum()
        .astype("int64")
        .reset_index()
    )
    return counts


def latest_plan_status(plans: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """Each proposed plan's current status: its latest ``plan_events`` row, else ``proposed`` (the
    ``plan_status`` view's rule). Columns ``cluster``, ``plan_id``, ``proposed_for``, ``status``,
    ``as_of``, ``actions_done``, ``actions_total``, ``detail``."""
    proposed = plans.loc[plans["status"] == PlanStatus.PROPOSED.value, ["cluster", "plan_id", "window_end"]]
    proposed = proposed.rename(columns={"window_end": "proposed_for"})
    newest = (
        events.sort_values(["window_end", "recorded_at"])
        .groupby("plan_id")
        .tail(1)[["plan_id", "status", "window_end", "actions_done", "actions_total", "detail"]]
        .rename(columns={"window_end": "as_of"})
    )
    frame = proposed.merge(newest, on="plan_id", how="left")
    frame["status"] = frame["status"].fillna(PlanStatus.PROPOSED.value)
    return frame.sort_values(["proposed_for", "cluster"], ascending=[False, True]).reset_index(drop=True)


def newest_window(frame: pd.DataFrame, keys: tuple[str, ...] = ("cluster", "group_id")) -> pd.DataFrame:
    """The rows of each ``keys`` group's newest ``window_end`` (as the ``latest_consumer_ranking`` view)."""
    if frame.empty:
        return frame
    newest = frame.groupby(list(keys))["window_end"].transform("max")
    return frame[frame["window_end"] == newest].reset_index(drop=True)


def traffic_beside_count(ranking: pd.DataFrame) -> pd.DataFrame:
    """Per group, window and member: its share of the group's bytes/s and of its partitions, long form
    (``measure`` is ``traffic`` or ``partitions``, ``share`` in [0, 1]), so a chart puts the two side by
    side: a member whose traffic share is far above its partition share is what a count-based view misses."""
    keys = ["cluster", "group_id", "window_end"]
    frame = ranking[keys + ["client_id", "member_id", "bytes_per_sec", "partitions"]].copy()
    frame["member"] = frame["client_id"].fillna("") + " " + frame["member_id"].str[-6:]
    totals = frame.groupby(keys)[["bytes_per_sec", "partitions"]].transform("sum")
    frame["traffic"] = (
        frame["bytes_per_sec"] / totals["bytes_per_sec"].where(totals["bytes_per_sec"] > 0)
    ).fillna(0.0)
    frame["partitions"] = (frame["partitions"] / totals["partitions"].where(totals["partitions"] > 0)).fillna(
        0.0
    )
    return frame.melt(
        id_vars=keys + ["member"],
        value_vars=["traffic", "partitions"],
        var_name="measure",
        value_name="share",
    ).sort_values(keys + ["member", "measure"], ignore_index=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m balancer.notebook``: print the lakehouse the notebooks will read, or why none is there."""
    storage = lakehouse()
    try:
        read_table(storage, "balance_plans", columns=["plan_id"])
    except MissingLakehouseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a table there but unreadable (a broken log or data file): one line
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"error: cannot read 'balance_plans' under {storage.root}: {reason}", file=sys.stderr)
        return 1
    print(f"the notebooks read the lakehouse at {storage.root}")
    return 0


if __name__ == "__main__":
    from balancer.cli.main import end_process

    # Ended as the `balancer` command ends: past the table scan, the interpreter's shutdown could
    # abort in Arrow's thread teardown (apache/arrow#39862) after the answer is printed.
    end_process(main())
