"""Which packages the distribution holds, and where (the rest is in pyproject.toml).

* An editable install of a clone (``pip install -e .``) keeps the clone's layout: ``reference``,
  ``tools`` and ``transformer_spec`` as they are in the repository (``python -m tools.grade``).
* A wheel (``python -m build``) puts ``reference/``, ``tools/``, ``spec_tests/`` and
  ``properties/`` inside the package, as ``transformer_spec.reference`` and so on, so that it
  adds no generic top-level names to site-packages. :mod:`transformer_spec.layout` tells the code
  which of the two it runs in.
"""

import sys

from setuptools import find_packages, setup

PARTS = ("reference", "tools", "spec_tests", "properties")  # transformer_spec/layout.py:PARTS
DATA = {"transformer_spec": ["rubric*.toml"], "spec_tests.snapshots": ["*.pt"]}

# setuptools runs this file with the command it builds: "editable_wheel" for `pip install -e .`
EDITABLE = any(cmd in sys.argv for cmd in ("editable_wheel", "develop"))

if EDITABLE:
    packages = find_packages(include=["reference*", "transformer_spec*", "tools*"])
    package_dir = {}
    package_data = {"transformer_spec": DATA["transformer_spec"]}
else:
    packages = find_packages(include=["transformer_spec*"])
    package_dir = {}
    for part in PARTS:
        for pkg in find_packages(include=[part, part + ".*"]):
            packages.append("transformer_spec." + pkg)
            package_dir["transformer_spec." + pkg] = pkg.replace(".", "/")
    package_data = {("transformer_spec." + k if k != "transformer_spec" else k): v for k, v in DATA.items()}
    # the contract, for the starter kit of `transformer-spec release` (tools/release.py)
    packages.append("transformer_spec.docs")
    package_dir["transformer_spec.docs"] = "docs"
    package_data["transformer_spec.docs"] = ["contract.md"]

setup(packages=packages, package_dir=package_dir, package_data=package_data, include_package_data=False)
