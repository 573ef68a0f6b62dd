"""Late telemetry: kept in telemetry_raw with is_late = true, and finalized windows stay closed."""

from __future__ import annotations

import pytest
from support import MINUTE, T0, job_config, produce, simulated

from balancer.spark import job
from balancer.spark.lakehouse import Lakehouse

pytestmark = pytest.mark.integration


def rows(frame, *order) -> list[dict]:
    return [r.asDict(recursive=True) for r in frame.orderBy(*order).collect()]


def test_late_records_are_flagged_and_do_not_reopen_finalized_windows(spark, broker, topic, tmp_path):
    cluster = simulated(partitions_per_topic=(2, 3), seed=5, cluster="late-1")
    config = job_config(tmp_path, broker.bootstrap_servers, topic)
    lakehouse = Lakehouse(spark, config.lakehouse.path, engine="delta-rs")

    # Minutes 0-11 with a 1-minute watermark: windows [0,5) and [5,10) are finalized.
    on_time = [r for m in range(12) for r in cluster.telemetry(T0 + m * MINUTE)]
    produce(broker.bootstrap_servers, topic, on_time)
    job.run_until_idle(spark, job.start(spark, config, once=True))
    first_window = spark.sql(f"SELECT timestamp_millis({T0 + 5 * MINUTE}) AS t").first()["t"]
    loads_before = rows(lakehouse.read("partition_load"), "window_end", "topic", "partition")
    plans_before = rows(lakehouse.read("balance_plans"), "window_end")
    assert {r["window_end"] for r in loads_before} == {first_window, plans_before[-1]["window_end"]}
    assert len(plans_before) == 2
    assert lakehouse.read("telemetry_raw").where("is_late").count() == 0

    # Restarted job: minute 2 again, at double the traffic (it would change the [0,5) loads if counted),
    # followed by on-time minute 12. Minute 2 is 9 minutes behind the landed maximum (minute 11).
    for p in cluster.partitions.values():
        p["bytes_in"] *= 2
    late = cluster.telemetry(T0 + 2 * MINUTE)
    fresh = cluster.telemetry(T0 + 12 * MINUTE)
    produce(broker.bootstrap_servers, topic, late + fresh)
    job.run_until_idle(spark, job.start(spark, config, once=True))

    raw = lakehouse.read("telemetry_raw")
    assert raw.count() == len(on_time) + len(late) + len(fresh)
    flagged = raw.where("is_late").select("ts").distinct().collect()
    assert raw.where("is_late").count() == len(late)
    assert [r["ts"] for r in flagged] == [
        spark.sql(f"SELECT timestamp_millis({T0 + 2 * MINUTE}) AS t").first()["t"]
    ]
    assert raw.where(f"NOT is_late AND unix_millis(ts) = {T0 + 12 * MINUTE}").count() == len(fresh)

    # Finalized windows are not reopened: same load rows, same plans (minute 12 closes no new window).
    loads_after = rows(lakehouse.read("partition_load"), "window_end", "topic", "partition")
    assert loads_after == loads_before
    plans_after = rows(lakehouse.read("balance_plans"), "window_end")
    assert [(p["plan_id"], p["status"], p["bytes_to_move"]) for p in plans_after] == [
        (p["plan_id"], p["status"], p["bytes_to_move"]) for p in plans_before
    ]
