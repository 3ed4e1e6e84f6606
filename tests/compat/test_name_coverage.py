"""Name coverage (parity session): every public name of the PyTorch modules in
name_coverage.MODULES exists in fiamma at the mapped path or is documented as absent, with a
reason, in docs/porting_absent.toml; nothing documented absent exists (outside groups marked
pending) or is a misspelt name; the coverage table in docs/porting.md is current.

Fix a failure by writing the name, or by adding it to docs/porting_absent.toml with the reason,
then `python tests/compat/name_coverage.py --write` to refresh the table.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import name_coverage as nc  # noqa: E402

pytestmark = pytest.mark.parity
torch = pytest.importorskip("torch")
if not nc.ABSENT_FILE.exists():
    pytest.skip("run from a copy of tests/ without the repository's docs/",
                allow_module_level=True)


def _lib_available(torch_path):
    return importlib.util.find_spec(torch_path.split(".")[0]) is not None


@pytest.mark.parametrize("module", list(nc.MODULES))
def test_every_public_name_present_or_documented(module):
    if not _lib_available(module):
        pytest.skip(f"{module.split('.')[0]} is not installed")
    names, present, documented, missing, stale = nc.coverage([module])[module]
    assert names, f"no public names found in {module}"
    assert not missing, (f"{module}: {len(missing)} public names neither in fiamma nor in "
                         f"docs/porting_absent.toml: {' '.join(missing)}")
    assert not stale, (f"{module}: documented absent but present in fiamma (or not a public "
                       f"PyTorch name): {' '.join(stale)}")


def test_coverage_table_in_porting_md_is_current():
    mods = nc.available_modules()
    if len(mods) != len(nc.MODULES):
        pytest.skip("torchvision/torchaudio not installed: the table counts every module")
    doc = nc.PORTING.read_text()
    a, b = doc.index(nc.BEGIN), doc.index(nc.END) + len(nc.END)
    assert doc[a:b] == nc.table(nc.coverage(mods)), \
        "docs/porting.md's coverage table is stale: python tests/compat/name_coverage.py --write"


def test_public_names_exclude_imports_and_include_constants():
    assert "math" not in nc.public_names("torch.nn.functional")
    assert "Tensor" not in nc.public_names("torch.nn.functional")
    assert {"pi", "float32", "nn", "zeros"} <= set(nc.public_names("torch"))
    assert "Linear" in nc.public_names("torch.nn")
