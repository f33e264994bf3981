"""The notebooks of notebooks/ run top to bottom (nbclient) in the docs mode, with this virtualenv's Python
registered as their kernel in a temporary folder (nothing is written outside it or the repository)."""

import os
import sys
from pathlib import Path

import nbformat
import pytest
from ipykernel.kernelspec import write_kernel_spec
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
KERNEL = "zerollm-test"


@pytest.fixture(scope="module")
def kernel_home(tmp_path_factory):
    """A kernel spec for sys.executable, and every folder Jupyter, IPython and matplotlib would write to,
    all under one temporary folder."""
    home = tmp_path_factory.mktemp("jupyter")
    write_kernel_spec(str(home / "kernels" / KERNEL))
    env = {"JUPYTER_RUNTIME_DIR": home / "runtime", "JUPYTER_DATA_DIR": home / "data",
           "JUPYTER_CONFIG_DIR": home / "config", "IPYTHONDIR": home / "ipython", "MPLCONFIGDIR": home / "mpl",
           "ZEROLLM_DOCS_TEST": "1", "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update({k: str(v) for k, v in env.items()})
    yield home
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def test_there_is_a_notebook_per_part_of_the_course():
    assert [p.name.split("_")[0] for p in NOTEBOOKS] == [f"part{i}" for i in range(1, 10)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_is_stored_without_outputs_and_in_both_languages(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)
    text = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert any("\u4e00" <= ch <= "\u9fff" for ch in text) and "Part" in text


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_runs_top_to_bottom(path, kernel_home, tmp_path):
    nb = nbformat.read(path, as_version=4)
    km = KernelManager(kernel_name=KERNEL, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_home / "kernels")]))
    NotebookClient(nb, km=km, timeout=120, resources={"metadata": {"path": str(tmp_path)}}).execute()
    images = sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert images >= 1                                  # every part draws at least one figure inline
