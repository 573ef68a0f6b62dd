"""WatermarkLog: what a (replayed) batch starts from, kept in the checkpoint."""

from __future__ import annotations

from balancer.spark.land.telemetry import WatermarkLog


def test_a_batch_starts_from_the_newest_earlier_entry_and_a_replay_ignores_its_own(tmp_path):
    asked = []
    log = WatermarkLog(tmp_path / "watermarks", fallback=lambda: asked.append(1) or 42)
    assert log.before(0) == 42 and asked == [1]  # nothing recorded: the landed data decides
    log.record(0, None)  # batch 0 held only bad records: no event time yet
    log.record(1, 1_000)
    log.record(2, 5_000)
    assert log.before(1) is None
    assert log.before(2) == 1_000
    assert log.before(3) == 5_000
    # Batch 2 crashed after recording and is replayed: it starts where it started the first time.
    assert log.before(2) == 1_000
    assert asked == [1]


def test_only_the_newest_entries_are_kept(tmp_path):
    log = WatermarkLog(tmp_path / "watermarks", fallback=lambda: None)
    for batch in range(WatermarkLog.KEEP + 20):
        log.record(batch, batch * 10)
    kept = sorted(int(p.name) for p in (tmp_path / "watermarks").iterdir())
    assert kept == list(range(20, WatermarkLog.KEEP + 20))
    assert log.before(WatermarkLog.KEEP + 20) == (WatermarkLog.KEEP + 19) * 10
    assert not list((tmp_path / "watermarks").glob(".*"))  # no staging file left behind
