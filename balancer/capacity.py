"""Cruise Control's broker capacity files, in this job's units (bytes/s and bytes).

The three shapes Cruise Control ships (``config/capacity.json``, ``capacityJBOD.json``,
``capacityCores.json``; read by ``BrokerCapacityConfigFileResolver``)::

    {"brokerCapacities": [
      {"brokerId": "-1", "capacity": {"DISK": "100000", "CPU": "100", "NW_IN": "10000", "NW_OUT": "10000"},
       "doc": "the default"},
      {"brokerId": "0", "capacity": {"DISK": {"/logs-1": "250000", "/logs-2": "250000"},
                                     "CPU": {"num.cores": "16"}, "NW_IN": "50000", "NW_OUT": "50000"}}]}

Rules, Cruise Control's unless said otherwise:

- every figure is a number written as a string (a JSON number is accepted too);
- DISK is in MB, or a JBOD map of absolute log directory -> MB, summed; NW_IN and NW_OUT are in
  KB/s. 1 KB = 1024 B and 1 MB = 1024² B (``HolderUtils.convertUnit`` divides by these);
- CPU is a percentage ("100"), or ``{"num.cores": "N"}``; either every entry gives num.cores or
  none does;
- broker ``-1`` is the default, used for a broker the file does not list;
- all four resources must be given for every entry.

Stricter than Cruise Control, so a typo cannot silently become a capacity: an unknown resource
key, a broker listed twice, a figure that is not finite and positive, or a CPU map with other keys
than num.cores is an error (:class:`CapacityError`, naming the entry and the field).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from balancer.files import read_json

DEFAULT_BROKER_ID = -1
KB = 1024.0
MB = 1024.0**2
RESOURCES = ("DISK", "CPU", "NW_IN", "NW_OUT")


class CapacityError(ValueError):
    """A capacity file that cannot be used; the message names the entry and the field."""


@dataclass(frozen=True)
class BrokerCapacity:
    network_in: float  # bytes/s
    network_out: float  # bytes/s
    disk: float  # bytes (the sum over a JBOD broker's log directories)
    cores: float | None  # num.cores; None when the file gives CPU as a percentage (Cruise Control assumes 1)


@dataclass(frozen=True)
class Capacities:
    default: BrokerCapacity | None  # broker -1's entry
    brokers: Mapping[int, BrokerCapacity]

    def for_broker(self, broker_id: int) -> BrokerCapacity | None:
        """The broker's own entry, else the default (None when the file has neither)."""
        return self.brokers.get(broker_id, self.default)


def parse_capacities(doc: dict) -> Capacities:
    """The capacities a parsed capacity file describes (see the module docstring for its rules)."""
    if not isinstance(doc, dict):
        raise CapacityError(f"expected a JSON object with 'brokerCapacities', got {type(doc).__name__}")
    entries = doc.get("brokerCapacities")
    if not isinstance(entries, list):
        raise CapacityError(
            "'brokerCapacities': expected a list of broker entries, "
            f"got {'nothing' if entries is None else type(entries).__name__}"
        )
    parsed: dict[int, BrokerCapacity] = {}
    uses_cores: dict[bool, str] = {}  # whether an entry gives num.cores -> the first such entry
    for i, entry in enumerate(entries):
        where = f"brokerCapacities[{i}]"
        if not isinstance(entry, dict):
            raise CapacityError(f"{where}: expected an object, got {type(entry).__name__}")
        broker_id = _broker_id(entry.get("brokerId"), where)
        where = f"{where} (brokerId {broker_id})"
        if broker_id in parsed:
            raise CapacityError(f"{where}: broker {broker_id} is listed twice")
        capacity = entry.get("capacity")
        if not isinstance(capacity, dict):
            raise CapacityError(f"{where}: 'capacity': expected an object of {', '.join(RESOURCES)}")
        unknown = sorted(set(capacity) - set(RESOURCES))
        if unknown:
            raise CapacityError(
                f"{where}: capacity.{unknown[0]}: unknown resource (expected {', '.join(RESOURCES)})"
            )
        missing = [r for r in RESOURCES if r not in capacity]
        if missing:
            raise CapacityError(
                f"{where}: capacity.{missing[0]}: missing (every entry gives {', '.join(RESOURCES)})"
            )
        cores = _cores(capacity["CPU"], f"{where}: capacity.CPU")
        uses_cores.setdefault(cores is not None, where)
        if len(uses_cores) > 1:
            raise CapacityError(
                f"{where}: capacity.CPU: num.cores must be given by every entry or by none "
                f"({uses_cores[True]} gives it, {uses_cores[False]} does not)"
            )
        parsed[broker_id] = BrokerCapacity(
            network_in=_figure(capacity["NW_IN"], f"{where}: capacity.NW_IN") * KB,
            network_out=_figure(capacity["NW_OUT"], f"{where}: capacity.NW_OUT") * KB,
            disk=_disk(capacity["DISK"], f"{where}: capacity.DISK") * MB,
            cores=cores,
        )
    default = parsed.pop(DEFAULT_BROKER_ID, None)
    return Capacities(default=default, brokers=parsed)


def read_capacities(path: str | Path) -> Capacities:
    """The capacity file at ``path``; every problem is a :class:`CapacityError` naming the file."""
    doc = read_json(path, what="capacity file", error=CapacityError)
    try:
        return parse_capacities(doc)
    except CapacityError as e:
        raise CapacityError(f"capacity file {path}: {e}") from None


def _broker_id(value: object, where: str) -> int:
    # Gson reads brokerId into a Java int from a string or a number.
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise CapacityError(f"{where}: brokerId: expected an integer (as a string), got {value!r}")
    try:
        broker_id = int(value.strip()) if isinstance(value, str) else value
    except ValueError:
        raise CapacityError(f"{where}: brokerId: expected an integer (as a string), got {value!r}") from None
    if not DEFAULT_BROKER_ID <= broker_id <= 2**31 - 1:
        raise CapacityError(
            f"{where}: brokerId: expected -1 (the default) or a broker id >= 0, got {broker_id}"
        )
    return broker_id


def _figure(value: object, where: str) -> float:
    """A finite positive number written as a string (or a JSON number)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise CapacityError(f"{where}: expected a number as a string, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise CapacityError(f"{where}: expected a number as a string, got {value!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise CapacityError(f"{where}: expected a finite number > 0, got {value!r}")
    return number


def _disk(value: object, where: str) -> float:
    """MB: one figure, or the sum of a JBOD broker's {absolute log dir: MB}."""
    if not isinstance(value, dict):
        return _figure(value, where)
    if not value:
        raise CapacityError(f"{where}: a JBOD map needs at least one log directory")
    total = 0.0
    for log_dir, mb in value.items():
        if not isinstance(log_dir, str) or not log_dir.startswith("/"):
            raise CapacityError(f"{where}: log directory {log_dir!r} must be an absolute path")
        total += _figure(mb, f"{where}[{log_dir!r}]")
    return total


def _cores(value: object, where: str) -> float | None:
    """num.cores from a {"num.cores": "N"} CPU map; None for a percentage (validated, then unused)."""
    if not isinstance(value, dict):
        _figure(value, where)
        return None
    if "num.cores" not in value:
        raise CapacityError(f"{where}: a CPU map needs 'num.cores'")
    extra = sorted(set(value) - {"num.cores"})
    if extra:
        raise CapacityError(f"{where}: unknown key {extra[0]!r} (a CPU map holds only 'num.cores')")
    return _figure(value["num.cores"], f"{where}['num.cores']")
