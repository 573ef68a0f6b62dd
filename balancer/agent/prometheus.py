"""Prometheus' text exposition format (version 0.0.4), the part an exporter's scrape needs.

``name{label="value",...} number [timestamp]`` per line; ``#`` lines are comments (HELP, TYPE). A line
that is not a sample is counted, never guessed at: an endpoint serving something else (an HTML error
page, a truncated body, binary junk) yields no samples and a count of bad lines.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class Parsed:
    samples: list[Sample]
    bad_lines: int


def parse(text: str) -> Parsed:
    """The samples of an exposition body and the number of lines that are neither samples nor comments."""
    if not isinstance(text, str):
        raise TypeError(f"text: expected str, got {type(text).__name__}")
    samples: list[Sample] = []
    bad = 0
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        sample = _sample(line)
        if sample is None:
            bad += 1
        else:
            samples.append(sample)
    return Parsed(samples, bad)


def _sample(line: str) -> Sample | None:
    match = _NAME.match(line)
    if match is None:
        return None
    name, at = match.group(), match.end()
    labels: dict[str, str] = {}
    if at < len(line) and line[at] == "{":
        parsed = _labels(line, at + 1)
        if parsed is None:
            return None
        labels, at = parsed
    rest = line[at:].split()
    if not rest or len(rest) > 2 or (at < len(line) and not line[at].isspace()):
        return None
    try:
        value = float(rest[0])
        if len(rest) == 2:
            int(rest[1])  # an optional timestamp, in ms
    except ValueError:
        return None
    if math.isnan(value) and rest[0].lower() not in ("nan",):
        return None
    return Sample(name, labels, value)


def _labels(line: str, at: int) -> tuple[dict[str, str], int] | None:
    """The labels from ``at`` (just after '{') and the position after the closing '}'."""
    labels: dict[str, str] = {}
    n = len(line)
    while True:
        while at < n and line[at] in " ,":
            at += 1
        if at < n and line[at] == "}":
            return labels, at + 1
        match = _LABEL_NAME.match(line, at)
        if match is None or match.end() + 1 >= n or line[match.end()] != "=" or line[match.end() + 1] != '"':
            return None
        key, at = match.group(), match.end() + 2
        value = []
        while True:
            if at >= n:
                return None
            char = line[at]
            if char == "\\":
                if at + 1 >= n or line[at + 1] not in _ESCAPES:
                    return None
                value.append(_ESCAPES[line[at + 1]])
                at += 2
            elif char == '"':
                at += 1
                break
            else:
                value.append(char)
                at += 1
        if key in labels:
            return None
        labels[key] = "".join(value)
