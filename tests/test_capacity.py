"""Cruise Control's capacity files: the three shapes it ships, units, the default broker, and errors."""

from __future__ import annotations

import json

import pytest

from balancer.capacity import BrokerCapacity, CapacityError, parse_capacities, read_capacities

# As linkedin/cruise-control ships them in config/.
CAPACITY = """{
  "brokerCapacities":[
    {
      "brokerId": "-1",
      "capacity": {
        "DISK": "100000",
        "CPU": "100",
        "NW_IN": "10000",
        "NW_OUT": "10000"
      },
      "doc": "The default capacity. Units: disk MB, cpu percent, network KB."
    },
    {
      "brokerId": "0",
      "capacity": {
        "DISK": "500000",
        "CPU": "100",
        "NW_IN": "50000",
        "NW_OUT": "50000"
      },
      "doc": "This overrides the capacity for broker 0."
    }
  ]
}"""

CAPACITY_JBOD = """{
  "brokerCapacities":[
    {
      "brokerId": "-1",
      "capacity": {
        "DISK": {"/tmp/kafka-logs-1": "100000", "/tmp/kafka-logs-2": "100000", "/tmp/kafka-logs-3": "50000",
          "/tmp/kafka-logs-4": "50000", "/tmp/kafka-logs-5": "150000", "/tmp/kafka-logs-6": "50000"},
        "CPU": "100",
        "NW_IN": "10000",
        "NW_OUT": "10000"
      },
      "doc": "The default capacity for a broker with multiple logDirs each on a separate heterogeneous disk."
    },
    {
      "brokerId": "0",
      "capacity": {
        "DISK": {"/tmp/kafka-logs": "500000"},
        "CPU": "100",
        "NW_IN": "50000",
        "NW_OUT": "50000"
      },
      "doc": "This overrides the capacity for broker 0. This broker is not a JBOD broker."
    },
    {
      "brokerId": "1",
      "capacity": {
        "DISK": {"/tmp/kafka-logs-1": "250000", "/tmp/kafka-logs-2": "250000"},
        "CPU": "100",
        "NW_IN": "50000",
        "NW_OUT": "50000"
      },
      "doc": "This overrides the capacity for broker 1. This broker is a JBOD broker."
    }
  ]
}"""

CAPACITY_CORES = """{
  "brokerCapacities":[
    {
      "brokerId": "-1",
      "capacity": {
        "DISK": "100000",
        "CPU": {"num.cores": "16"},
        "NW_IN": "10000",
        "NW_OUT": "10000"
      },
      "doc": "The default capacity. Units: disk MB, cpu cores, network KB."
    },
    {
      "brokerId": "0",
      "capacity": {
        "DISK": "500000",
        "CPU": {"num.cores": "32"},
        "NW_IN": "50000",
        "NW_OUT": "50000"
      },
      "doc": "This overrides the capacity for broker 0."
    }
  ]
}"""

KB, MB = 1024, 1024 * 1024


def test_capacity_json(tmp_path):
    path = tmp_path / "capacity.json"
    path.write_text(CAPACITY)
    caps = read_capacities(path)
    assert caps.default == BrokerCapacity(
        network_in=10000 * KB, network_out=10000 * KB, disk=100000 * MB, cores=None
    )
    assert dict(caps.brokers) == {
        0: BrokerCapacity(network_in=50000 * KB, network_out=50000 * KB, disk=500000 * MB, cores=None)
    }
    assert caps.for_broker(0).disk == 500000 * MB == 524_288_000_000
    assert caps.for_broker(7) == caps.default  # unlisted: the default


def test_capacity_jbod_json_sums_the_log_dirs(tmp_path):
    path = tmp_path / "capacityJBOD.json"
    path.write_text(CAPACITY_JBOD)
    caps = read_capacities(str(path))
    assert caps.default.disk == 500000 * MB
    assert caps.for_broker(0).disk == 500000 * MB and caps.for_broker(1).disk == 500000 * MB
    assert caps.for_broker(1).network_in == 50000 * KB and caps.for_broker(1).cores is None


def test_capacity_cores_json(tmp_path):
    path = tmp_path / "capacityCores.json"
    path.write_text(CAPACITY_CORES)
    caps = read_capacities(path)
    assert caps.default.cores == 16 and caps.for_broker(0).cores == 32 and caps.for_broker(5).cores == 16


def test_without_a_default_an_unlisted_broker_has_none():
    doc = json.loads(CAPACITY)
    doc["brokerCapacities"] = doc["brokerCapacities"][1:]
    caps = parse_capacities(doc)
    assert caps.default is None and caps.for_broker(1) is None and caps.for_broker(0) is not None
    assert parse_capacities(
        {
            "brokerCapacities": [
                {"brokerId": 3, "capacity": {"DISK": 1, "CPU": 100, "NW_IN": 2.5, "NW_OUT": "1e3"}}
            ]
        }
    ).for_broker(3) == BrokerCapacity(
        network_in=2.5 * KB, network_out=1000 * KB, disk=MB, cores=None
    )  # JSON numbers too


def entry(broker="1", **capacity):
    return {
        "brokerId": broker,
        "capacity": {"DISK": "100", "CPU": "100", "NW_IN": "10", "NW_OUT": "10", **capacity},
    }


@pytest.mark.parametrize(
    "doc, message",
    [
        ([], "expected a JSON object with 'brokerCapacities'"),
        ({}, "'brokerCapacities': expected a list of broker entries, got nothing"),
        ({"brokerCapacities": ["x"]}, r"brokerCapacities\[0\]: expected an object"),
        ({"brokerCapacities": [{"capacity": {}}]}, r"brokerCapacities\[0\]: brokerId: expected an integer"),
        ({"brokerCapacities": [entry("b1")]}, r"brokerCapacities\[0\]: brokerId: expected an integer .*'b1'"),
        ({"brokerCapacities": [entry("-2")]}, "brokerId: expected -1 .* got -2"),
        (
            {"brokerCapacities": [entry("1"), entry(1)]},
            r"brokerCapacities\[1\] \(brokerId 1\): broker 1 is listed twice",
        ),
        ({"brokerCapacities": [{"brokerId": "1"}]}, r"\(brokerId 1\): 'capacity': expected an object"),
        ({"brokerCapacities": [entry(NW_INN="5")]}, r"\(brokerId 1\): capacity.NW_INN: unknown resource"),
        (
            {"brokerCapacities": [{"brokerId": "1", "capacity": {"DISK": "1", "CPU": "1", "NW_IN": "1"}}]},
            "capacity.NW_OUT: missing",
        ),
        (
            {"brokerCapacities": [entry(NW_IN="fast")]},
            r"\(brokerId 1\): capacity.NW_IN: expected a number .*'fast'",
        ),
        ({"brokerCapacities": [entry(NW_OUT="0")]}, "capacity.NW_OUT: expected a finite number > 0"),
        ({"brokerCapacities": [entry(DISK="NaN")]}, "capacity.DISK: expected a finite number > 0"),
        ({"brokerCapacities": [entry(DISK="-5")]}, "capacity.DISK: expected a finite number > 0"),
        (
            {"brokerCapacities": [entry(DISK={"logs": "5"})]},
            "capacity.DISK: log directory 'logs' must be an absolute",
        ),
        ({"brokerCapacities": [entry(DISK={"/a": "x"})]}, r"capacity.DISK\['/a'\]: expected a number"),
        (
            {"brokerCapacities": [entry(DISK={})]},
            "capacity.DISK: a JBOD map needs at least one log directory",
        ),
        ({"brokerCapacities": [entry(DISK=True)]}, "capacity.DISK: expected a number as a string, got True"),
        ({"brokerCapacities": [entry(CPU={"cores": "4"})]}, r"capacity.CPU: a CPU map needs 'num.cores'"),
        ({"brokerCapacities": [entry(CPU={"num.cores": "4", "x": "1"})]}, "capacity.CPU: unknown key 'x'"),
        (
            {"brokerCapacities": [entry(CPU={"num.cores": "0"})]},
            r"capacity.CPU\['num.cores'\]: expected a finite",
        ),
        (
            {"brokerCapacities": [entry("-1", CPU={"num.cores": "4"}), entry("2")]},
            r"brokerCapacities\[1\] \(brokerId 2\): capacity.CPU: "
            r"num.cores must be given by every entry or by none",
        ),
    ],
)
def test_errors_name_the_entry_and_field(doc, message):
    with pytest.raises(CapacityError, match=message):
        parse_capacities(doc)


def test_file_errors_name_the_file(tmp_path):
    with pytest.raises(CapacityError, match=r"capacity file .*missing\.json: cannot read it"):
        read_capacities(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CapacityError, match=r"bad\.json: not valid JSON"):
        read_capacities(bad)
    bad.write_text(json.dumps({"brokerCapacities": [entry(NW_IN="x")]}))
    with pytest.raises(
        CapacityError, match=r"bad.json: brokerCapacities\[0\] \(brokerId 1\): capacity.NW_IN"
    ):
        read_capacities(bad)
    assert issubclass(CapacityError, ValueError)
