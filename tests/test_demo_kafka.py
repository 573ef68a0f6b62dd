"""``make run``'s scenario end to end, on real Apache Kafka brokers of its own: four KRaft nodes, each
running the Prometheus JMX exporter (the session's ``kafka`` fixture has three and no exporter), brokers 1-3
holding skewed traffic and broker 4 joining empty; ``balancer agent`` measuring them, the job planning,
``balancer execute`` (started by the job, ``executor.mode: auto``) carrying the plan out."""

from __future__ import annotations

import pytest

from balancer.config import REPO_ROOT, load_config
from balancer.demo.real import NEW_BROKER, run_scenario
from balancer.vocabulary import PlanStatus

pytestmark = pytest.mark.integration


def test_the_plan_completes_and_the_hottest_broker_by_its_own_meters_ends_below_the_threshold(
    spark, tmp_path
):
    # make run's config, its window too: the claim below is on one window of real brokers' meters, and in a
    # window half as long the producers' and scrapes' jitter alone can carry a broker past the threshold
    # when the plan predicts it just under.
    config = load_config(
        REPO_ROOT / "conf" / "kafka-demo.yaml",
        [f"lakehouse.path={tmp_path / 'lakehouse'}", f"checkpoint.path={tmp_path / 'checkpoints'}"],
    )
    lines: list[str] = []
    outcome = run_scenario(lambda: spark, config, tmp_path, say=lines.append, max_seconds=480)
    print("\n" + "\n".join(lines))

    # Every figure below is broker_load: the job's load model over what the agent scraped from the brokers'
    # JMX exporters. The scenario starts outside the threshold (else there is nothing to show)...
    hot, before = outcome.hottest(outcome.before)
    assert before > outcome.threshold, (hot, before, outcome.before)
    assert not outcome.before.get(NEW_BROKER, {}).get("network_in"), outcome.before.get(NEW_BROKER)
    # ...the plan is carried out on the cluster and the job sees it complete...
    assert outcome.status == PlanStatus.COMPLETED, outcome.status
    assert sorted(r["batch"] for r in outcome.executions) == [b["batch"] for b in outcome.batches]
    # ...every action's replicas and leader are where the plan put them, by the cluster's own metadata, and
    # no throttle is left on a broker or a topic it touched...
    assert outcome.misplaced == [], outcome.misplaced
    assert outcome.throttles_left == {}, outcome.throttles_left
    # ...and in the first full window after it, the hottest broker's network in is within the threshold,
    # with the new broker carrying its share.
    hottest, after = outcome.hottest(outcome.after)
    limit = outcome.limit(outcome.after)
    print(
        f"network in: broker {hot} at {before:.3f} before, broker {hottest} at {after:.3f} after; "
        + ", ".join(f"{b}: {r['network_in'] / 1000:.1f} kB/s" for b, r in sorted(outcome.after.items()))
    )
    assert after < outcome.threshold, (hottest, after, outcome.after)
    assert all(outcome.after[b]["network_in"] <= limit[b] for b in outcome.after)
    assert outcome.after[NEW_BROKER]["network_in"] > 0
    # The brokers' own totals, with no load model in between (BytesIn + ReplicationBytesIn, equal
    # capacities): the same verdict.
    own = {b: rates["in"] for b, rates in outcome.raw_after.items()}
    assert sorted(own) == sorted(outcome.after), (own, outcome.raw_missed)
    mean = sum(own.values()) / len(own)
    print(
        "own meters, network in after: "
        + ", ".join(f"{b}: {v / 1000:.1f} kB/s" for b, v in sorted(own.items()))
    )
    assert max(own.values()) / mean < outcome.threshold, own
