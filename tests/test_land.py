"""The poll gate the topology and consumer-group reads share (``balancer.spark.land.Interval``)."""

from balancer.spark import land


def test_a_poll_is_due_every_interval_from_the_start_of_the_last_one_that_succeeded(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(land.time, "monotonic", lambda: now[0])
    gate = land.Interval(60)
    assert gate.due()  # never polled
    now[0] += 5  # the poll itself takes 5 s
    gate.done()
    now[0] += 54  # 59 s after the poll started
    assert not gate.due()
    assert gate.due(force=True)
    now[0] += 1  # 60 s after it started, 55 s after it ended
    assert gate.due()
    # That poll failed (no done): the next batch polls again at once.
    now[0] += 1
    assert gate.due()
    gate.done()
    now[0] += 30
    assert not gate.due()
