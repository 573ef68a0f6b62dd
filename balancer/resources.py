"""Where ``conf/`` and ``lakehouse/`` are: the checkout, or the zip spark-submit.sh ships to executors."""

from __future__ import annotations

import zipfile
from functools import cache
from pathlib import Path


@cache
def resource_root() -> Path | zipfile.Path:
    here = Path(__file__).resolve()
    for parent in here.parents:
        # Imported from build/balancer.zip (spark-submit --py-files): the resources are in the zip too.
        if parent.suffix == ".zip" and parent.is_file():
            return zipfile.Path(parent)
    return here.parent.parent


def sql_files(*parts: str) -> list:
    """The ``*.sql`` files of a resource folder, sorted by name (zipfile.Path has no glob on 3.11)."""
    folder = resource_root().joinpath(*parts)
    return sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
