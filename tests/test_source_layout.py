"""A source tree imported through ``PYTHONPATH`` runs its own ``kernels/`` folder."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# An editable install's finder (setuptools' ``_EditableFinder``) maps a full module name to its
# own checkout, wherever the parent package came from; this one maps hf_stable_attn.kernels
# to a decoy, as an editable install of another checkout would.
PROBE = textwrap.dedent("""
    import importlib.util, sys

    class EditableLike:
        @classmethod
        def find_spec(cls, fullname, path=None, target=None):
            if fullname == "hf_stable_attn.kernels":
                return importlib.util.spec_from_file_location(
                    fullname, sys.argv[1], submodule_search_locations=[])

    sys.meta_path.append(EditableLike)
    import hf_stable_attn.kernels
    print(hf_stable_attn.__file__)
    print(hf_stable_attn.kernels.__file__)
""")


def test_a_checkout_on_the_path_serves_its_own_kernels_past_an_editable_finder(tmp_path):
    tree = tmp_path / "tree"
    ignore = shutil.ignore_patterns("__pycache__")
    for folder in ("hf_stable_attn", "kernels"):
        shutil.copytree(REPO / folder, tree / folder, ignore=ignore)
    shutil.copy(REPO / "pyproject.toml", tree)
    decoy = tmp_path / "decoy_kernels.py"
    decoy.write_text("raise ImportError('the decoy kernels were imported')\n")
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-c", PROBE, str(decoy)], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    package, kernels = run.stdout.split()[-2:]
    assert Path(package) == tree / "hf_stable_attn" / "__init__.py"
    assert Path(kernels) == tree / "kernels" / "__init__.py"
