"""The same job through Python and through `neurocuda convert` gives the
same accuracy table and the same project file, byte for byte (CPU engine,
the bundled model)."""
import os
import subprocess

from conftest import BUILD_DIR, SOURCE_DIR, need_data

pytestmark = need_data


def test_python_and_cli_agree(tmp_path):
    import neurocuda
    model = "assets/models/fmnist_cnn.onnx"  # relative, as both record it
    cli_out, py_out, saved = tmp_path / "cli.ncsnn", tmp_path / "py.ncsnn", tmp_path / "saved.ncsnn"
    cli = subprocess.run([os.path.join(BUILD_DIR, "app", "neurocuda"), "convert", model, "-o", str(cli_out),
                          "--mean", "0.2860", "--std", "0.3530", "--limit", "1000", "--eval-T", "8",
                          "--engine", "cpu"], cwd=SOURCE_DIR, capture_output=True, text=True, check=True)
    cwd = os.getcwd()
    os.chdir(SOURCE_DIR)
    try:
        snn = neurocuda.convert(model, "fashion-mnist", timesteps=8, mean=0.2860, std=0.3530, limit=1000,
                                engine="cpu", output=py_out, progress=False)
    finally:
        os.chdir(cwd)
    snn.save(saved)
    cli_table = cli.stdout[cli.stdout.index("Test accuracy"):cli.stdout.index("Saved ")]
    assert snn.results.table == cli_table, (snn.results.table, cli_table)
    assert py_out.read_bytes() == cli_out.read_bytes()
    assert saved.read_bytes() == cli_out.read_bytes()
