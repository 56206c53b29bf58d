"""Under tests/test_python.sh the tests import the package that
tools/install-python.sh installed (pip install --no-build-isolation .), not
the source tree's python/, and that package loads the libneurocuda inside it."""
import os

import pytest

from conftest import INSTALLED_ENV, SOURCE_DIR


@pytest.mark.skipif(not INSTALLED_ENV, reason="run in place (PYTHONPATH=python), not by tests/test_python.sh")
def test_the_installed_package_is_imported():
    import neurocuda
    package = os.path.dirname(os.path.realpath(neurocuda.__file__))
    assert package.startswith(os.path.realpath(INSTALLED_ENV) + os.sep), package
    assert not package.startswith(os.path.realpath(os.path.join(SOURCE_DIR, "python"))), package
    library = os.path.realpath(neurocuda._library.path)
    assert os.path.dirname(library) == package, library
