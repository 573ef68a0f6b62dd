"""Great Expectations, set up once per contract: suites validated on a Spark DataFrame, or on a pandas one
(small frames: no Spark job). GX is imported on first use; it is slow to import and the job may run
with the contract disabled."""

from __future__ import annotations

import math
import os
from typing import Any, Literal

from pyspark.sql import DataFrame

from balancer.spark.contract.expectations import suite_json


def _gx():
    # Before the import: GX reads it at import time. No usage analytics leave the job.
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx

    return gx


def load_suite(name: str, frame: str | None = None):
    """The suite as a GX ExpectationSuite; ``frame`` keeps only expectations whose meta.frame matches."""
    from great_expectations.core import ExpectationSuite

    spec = dict(suite_json(name))
    if frame is not None:
        spec["expectations"] = [e for e in spec["expectations"] if e.get("meta", {}).get("frame") == frame]
        spec["name"] = f"{name}.{frame}"
    _gx()
    return ExpectationSuite(**spec)


def py(value):
    """A plain Python value for JSON and keys: numpy scalars unwrapped, NaN (pandas' missing) as None."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def describe(result) -> tuple[str, str, str]:
    """(expectation type, column, what it says) for a GX expectation result."""
    config = result.expectation_config
    return config.type, config.kwargs.get("column", ""), (config.meta or {}).get("says", config.type)


class GxRunner:
    """One ephemeral GX context with a Spark and a pandas whole-frame batch definition, and the suites
    validated so far. ``parameters`` fill the suites' ``$PARAMETER`` references."""

    def __init__(self, parameters: dict[str, Any]):
        self.parameters = parameters
        self._context = None
        self._definitions: dict[str, object] = {}
        self._suites: dict[str, object] = {}

    def _definition(self, engine: Literal["spark", "pandas"]):
        if engine not in self._definitions:
            gx = _gx()
            if self._context is None:
                from great_expectations.data_context.types.base import ProgressBarsConfig

                self._context = gx.get_context(mode="ephemeral")
                self._context.variables.progress_bars = ProgressBarsConfig(
                    globally=False, metric_calculations=False
                )
            if engine == "spark":
                # persist=False: GX would cache every frame it is given and never release it.
                source = self._context.data_sources.add_spark(name="balancer", persist=False)
            else:
                source = self._context.data_sources.add_pandas(name="balancer-small")
            asset = source.add_dataframe_asset(name="contract")
            self._definitions[engine] = asset.add_batch_definition_whole_dataframe("micro_batch")
        return self._definitions[engine]

    def suite(self, name: str, frame: str | None = None):
        """Suite ``name`` (only its ``frame`` expectations, if given), loaded once."""
        key = f"{name}.{frame}"
        if key not in self._suites:
            self._suites[key] = load_suite(name, frame)
        return self._suites[key]

    def suite_of(self, key: str, expectations: list[dict]):
        """A suite of ``expectations`` (a suite's JSON entries) under ``key``, built once."""
        if key not in self._suites:
            from great_expectations.core import ExpectationSuite

            _gx()
            self._suites[key] = ExpectationSuite(name=key, expectations=expectations)
        return self._suites[key]

    def validate(self, suite, frame, result_format):
        """GX validation of a Spark DataFrame, or of a pandas one (small frames: no Spark job)."""
        engine: Literal["spark", "pandas"] = "spark" if isinstance(frame, DataFrame) else "pandas"
        batch = self._definition(engine).get_batch(batch_parameters={"dataframe": frame})
        return batch.validate(suite, result_format=result_format, expectation_parameters=self.parameters)
