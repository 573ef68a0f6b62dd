"""Runs the notebooks in ``notebooks/`` in a real Jupyter kernel (the venv's ipykernel, through nbclient)
against a lakehouse a test made, and reads named results back as JSON values."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from balancer.config import REPO_ROOT
from balancer.notebook import ENV_CONFIG, ENV_LAKEHOUSE

NOTEBOOKS = REPO_ROOT / "notebooks"
KERNEL = "python3"  # jupyter_client runs this spec with sys.executable: the venv's python
RESULTS_MIME = "application/json"


def notebook_paths() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def run_notebook(
    path: Path,
    lakehouse: str | Path,
    results: dict[str, str] | None = None,
    *,
    config: str | Path | None = None,
    timeout: int = 120,
) -> dict:
    """Execute every cell of ``path`` in a fresh kernel started in the notebook's folder, with
    ``BALANCER_LAKEHOUSE`` (and ``BALANCER_CONFIG`` when ``config`` is given) pointing it at the test's
    lakehouse. A cell that raises fails the test (nbclient's CellExecutionError names the cell).

    ``results`` maps a name to a Python expression evaluated in the kernel after the last cell; the
    values come back through JSON (numpy scalars as Python numbers, anything else JSON cannot hold as
    its ``str``). The kernel's
    ``sys.prefix`` is checked against this interpreter's, so the notebook ran on the venv."""
    notebook = nbformat.read(path, as_version=4)
    wanted = {"kernel_prefix": "sys.prefix", **(results or {})}
    values = "{" + ", ".join(f"{name!r}: ({expression})" for name, expression in wanted.items()) + "}"
    probe = nbformat.v4.new_code_cell(
        "import json as _json, sys\nfrom IPython.display import display as _display\n"
        "_plain = lambda value: value.item() if hasattr(value, 'item') else str(value)\n"
        f"_display({{{RESULTS_MIME!r}: _json.loads(_json.dumps({values}, default=_plain))}}, raw=True)"
    )
    notebook.cells.append(probe)
    env = {**os.environ, ENV_LAKEHOUSE: str(lakehouse)}
    if config is not None:
        env[ENV_CONFIG] = str(config)
    else:
        env.pop(ENV_CONFIG, None)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name=KERNEL,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute(env=env)
    shown = [o for o in probe.outputs if o.get("output_type") == "display_data"]
    assert len(shown) == 1, probe.outputs
    found = dict(shown[0]["data"][RESULTS_MIME])
    assert found.pop("kernel_prefix") == sys.prefix, "the kernel did not run the venv's python"
    return json.loads(json.dumps(found))
