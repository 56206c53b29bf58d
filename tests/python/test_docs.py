"""The complete script of docs/PYTHON.md runs as written."""
import os
import re
import subprocess
import sys

from conftest import SOURCE_DIR, need_data, need_torch

pytestmark = [need_data, need_torch]


def test_python_md_script_runs(tmp_path):
    with open(os.path.join(SOURCE_DIR, "docs", "PYTHON.md")) as f:
        text = f.read()
    section = text[text.index("## A complete script"):]
    script = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    (tmp_path / "script.py").write_text(script)
    # the package as the other tests import it (the installed one, see conftest)
    out = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "accuracy after step 8:" in out.stdout and "wrote model.ncsnn and model.nir" in out.stdout, out.stdout
    final = float(re.search(r"accuracy after step 8: ([0-9.]+)", out.stdout).group(1))
    assert final > 0.8, out.stdout
    assert (tmp_path / "model.nir").stat().st_size > 1000 and (tmp_path / "model.ncsnn").exists()
