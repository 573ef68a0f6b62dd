"""Reading the JSON files an operator points the job at (capacities, topology snapshots)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_json(path: str | Path, *, what: str, error: type[ValueError]) -> Any:
    """The JSON document at ``path``.

    An unreadable file or invalid JSON raises ``error`` naming ``what`` and the path."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise error(f"{what} {path}: cannot read it ({e.strerror or e})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise error(f"{what} {path}: not valid JSON ({e})") from None
