"""Contract: the data checked against its expectation suites (``lakehouse/expectations``), at ingest and
on each closed window, with every run recorded in ``quality_runs``. Rule: a window that fails its contract
is not planned; it is reported, with samples of the failing records."""
