"""Runs the notebooks in ``notebooks/`` in a real Jupyter kernel (the venv's ipykernel, through nbclient)
against a lakehouse a test made, and reads named results back as JSON values."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from balancer.config import REPO_ROOT
from balancer.notebook import ENV_CONFIG, ENV_LAKEHOUSE

NOTEBOOKS = REPO_ROOT / "notebooks"
KERNEL = "python3"  # the venv's spec runs "python", which jupyter_client resolves to sys.executable
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
    """``run_notebooks`` for one notebook: its results."""
    return run_notebooks({path: results or {}}, lakehouse, config=config, timeout=timeout)[path.name]


def run_notebooks(
    runs: dict[Path, dict[str, str]],
    lakehouse: str | Path,
    *,
    config: str | Path | None = None,
    timeout: int = 120,
) -> dict[str, dict]:
    """Execute every cell of each notebook in ``runs``, in order, in one real kernel started in the
    notebooks' folder with ``BALANCER_LAKEHOUSE`` (and ``BALANCER_CONFIG`` when ``config`` is given)
    pointing it at the test's lakehouse. The namespace is reset before each notebook (``%reset -f``), so
    none sees another's variables; sharing the kernel saves its start and the imports per notebook. A
    cell that raises fails the test, naming the notebook (nbclient's CellExecutionError names the cell).

    ``runs`` maps a notebook to its results: a name → a Python expression evaluated in the kernel after
    the notebook's last cell. The values come back through JSON (numpy scalars as Python numbers,
    anything else JSON cannot hold as its ``str``), keyed by the notebook's file name. The kernel's
    ``sys.prefix`` is checked against this interpreter's, so the notebooks ran on the venv."""
    combined = nbformat.v4.new_notebook()
    spans: list[tuple[str, int, int]] = []  # (notebook, its first cell, its probe cell)
    for path, results in runs.items():
        combined.cells.append(nbformat.v4.new_code_cell("get_ipython().run_line_magic('reset', '-f')"))
        first = len(combined.cells)
        combined.cells.extend(nbformat.read(path, as_version=4).cells)
        combined.cells.append(_probe({"kernel_prefix": "sys.prefix", **results}))
        spans.append((path.name, first, len(combined.cells) - 1))
    env = {**os.environ, ENV_LAKEHOUSE: str(lakehouse)}
    if config is not None:
        env[ENV_CONFIG] = str(config)
    else:
        env.pop(ENV_CONFIG, None)
    # Only the venv's kernel specs: one of the user's own cannot run the notebooks on another Python.
    specs = KernelSpecManager(kernel_dirs=[str(Path(sys.prefix) / "share" / "jupyter" / "kernels")])
    client = NotebookClient(
        combined,
        km=AsyncKernelManager(kernel_name=KERNEL, kernel_spec_manager=specs),
        timeout=timeout,
        kernel_name=KERNEL,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    found = {}
    with client.setup_kernel(env=env):
        for name, first, probe in spans:
            for index in range(first - 1, probe + 1):
                try:
                    client.execute_cell(combined.cells[index], index)
                except CellExecutionError as exc:
                    raise AssertionError(f"{name}: a cell failed\n{exc}") from None
            shown = [o for o in combined.cells[probe].outputs if o.get("output_type") == "display_data"]
            assert len(shown) == 1, (name, combined.cells[probe].outputs)
            values = dict(shown[0]["data"][RESULTS_MIME])
            assert values.pop("kernel_prefix") == sys.prefix, "the kernel did not run the venv's python"
            found[name] = json.loads(json.dumps(values))
    return found


def _probe(results: dict[str, str]):
    """A cell displaying ``results``' expressions, evaluated, as one JSON value."""
    values = "{" + ", ".join(f"{name!r}: ({expression})" for name, expression in results.items()) + "}"
    return nbformat.v4.new_code_cell(
        "import json as _json, sys\nfrom IPython.display import display as _display\n"
        "_plain = lambda value: value.item() if hasattr(value, 'item') else str(value)\n"
        f"_display({{{RESULTS_MIME!r}: _json.loads(_json.dumps({values}, default=_plain))}}, raw=True)"
    )
