"""A notebook executed headlessly (nbclient): cells define and call converted
functions, including a `%%time` cell, whose source IPython does not keep in a file."""

from __future__ import annotations

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")


def test_notebook_cells_convert():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import autoflow, jax.numpy as jnp"),
        nbformat.v4.new_code_cell(
            "def doubling(x):\n    while x < 10:\n        x = x * 2\n    return x"),
        nbformat.v4.new_code_cell(
            "print(float(autoflow.jit(doubling, strict=True)(jnp.float32(3.0))))"),
        nbformat.v4.new_code_cell(
            "%%time\nmag = lambda x: x if x > 0 else -x\n"
            "y = float(autoflow.jit(mag, strict=True)(-2.0))"),
        nbformat.v4.new_code_cell("print(y)"),
    ]
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    outputs = ["".join(o.get("text", "") for o in c.get("outputs", []) if o.get("name") == "stdout")
               for c in nb.cells]
    assert outputs[2].strip() == "12.0"   # eager: 3 -> 6 -> 12
    assert outputs[4].strip() == "2.0"
