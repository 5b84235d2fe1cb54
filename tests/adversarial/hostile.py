"""Hostile snippets, prepended or appended to a submission's ``__init__.py`` by ``corpus.py``.

Each is ordinary Python a student could submit; none of them may change a grade.
"""

# Prints 100 MB while being imported.
PRINT_100MB = '''
import sys as _sys
_chunk = "x" * (1 << 20)
for _ in range(100):
    _sys.stdout.write(_chunk)
'''

# Writes forged results where a naive grader would read them: the working folder, its parents,
# and the grader's own --out folder (found from the parent process's command line).
FORGE_FILES = '''
import json as _json, os as _os
_forged = {"score": 100, "tests": []}
_row = "student,status,total\\nforged_files,ok,100\\n"
def _plant(folder):
    try:
        with open(_os.path.join(folder, "results.json"), "w") as f:
            _json.dump(_forged, f)
        with open(_os.path.join(folder, "gradebook.csv"), "w") as f:
            f.write(_row)
    except OSError:
        pass
_plant(_os.getcwd())
_plant(_os.path.dirname(_os.getcwd()))
try:
    _args = open(f"/proc/{_os.getppid()}/cmdline", "rb").read().split(b"\\0")
    _cwd = _os.readlink(f"/proc/{_os.getppid()}/cwd")
    _out = _os.path.join(_cwd, _args[_args.index(b"--out") + 1].decode())
    _plant(_out)
    _me = _os.path.join(_out, "students", "forged_files")
    _os.makedirs(_me, exist_ok=True)
    _plant(_me)
    with open(_os.path.join(_out, "students", "intruder.txt"), "w") as f:
        f.write("planted")
except Exception:
    pass
'''

# Every comparison helper a test might use always succeeds.
PATCH_ALLCLOSE = '''
import torch as _torch, numpy as _np, numpy.testing as _npt
_torch.allclose = lambda *a, **k: True
_torch.equal = lambda *a, **k: True
_torch.testing.assert_close = lambda *a, **k: None
_npt.assert_allclose = lambda *a, **k: None
_npt.assert_array_equal = lambda *a, **k: None
_np.allclose = lambda *a, **k: True
'''

# The harness itself: the suite's assertion helpers and the grading plugin's scoring.
PATCH_HARNESS = '''
import transformer_spec.probes.assertions as _a, transformer_spec.results.outcomes as _o
_a.assert_close = lambda *a, **k: None
_a.assert_equal = lambda *a, **k: None
_orig_settle = _o.settle
def _forge(outcomes, end):
    outcomes = list(outcomes)
    _orig_settle(outcomes, end)
    for r in outcomes:
        r.kind, r.score, r.final = _o.Kind.PASSED, r.points, ""
_o.settle = _forge
'''

# Rewrites the test files (found from pytest's command line) so that no assertion can fail, and
# replaces the assertion helper in the test modules already imported.
EDIT_TESTS = '''
import os as _os, sys as _sys
for _name, _mod in list(_sys.modules.items()):
    if _name.startswith(("spec_tests.", "properties.")) and hasattr(_mod, "assert_close"):
        _mod.assert_close = lambda *a, **k: None
for _arg in _sys.argv:
    if _arg.endswith(".py") and _os.path.isfile(_arg) and "test_" in _os.path.basename(_arg):
        try:
            _src = open(_arg).read().replace("assert_close(", "(lambda *a, **k: None)(")
            open(_arg, "w").write(_src)
        except OSError:
            pass
'''

DELETE_TESTS = '''
import os as _os, sys as _sys
for _arg in _sys.argv:
    if _arg.endswith(".py") and _os.path.isfile(_arg) and "test_" in _os.path.basename(_arg):
        try:
            _os.remove(_arg)
        except OSError:
            pass
'''

# A tensor that claims to equal anything: every comparison-like torch function returns "equal".
EQUAL_TO_ANYTHING = '''
import torch as _torch
class _Liar(_torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("allclose", "equal", "__eq__", "eq", "isclose"):
            out = super().__torch_function__(func, types, args, kwargs or {})
            return True if isinstance(out, bool) else _torch.ones_like(out, dtype=_torch.bool).as_subclass(_torch.Tensor)
        if name in ("sub", "__sub__", "abs", "isnan", "isinf"):
            out = super().__torch_function__(func, types, args, kwargs or {})
            return _torch.zeros_like(out).as_subclass(_torch.Tensor) if isinstance(out, _torch.Tensor) else out
        return super().__torch_function__(func, types, args, kwargs or {})
_real_sdpa = scaled_dot_product_attention
def scaled_dot_product_attention(q, k, v, mask=None, scale=None):
    out, w = _real_sdpa(q, k, v, mask=mask, scale=scale)
    return (out * 0).as_subclass(_Liar), (w * 0).as_subclass(_Liar)
'''

CONFTEST_ALL_PASS = '''
import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
    print("PASSED", item.nodeid)
'''

PYTEST_INI = "[pytest]\naddopts = -p no:transformer_spec.pytest_plugin.grading --deselect spec_tests\n"
PYPROJECT = "[tool.pytest.ini_options]\naddopts = ['-x']\n"
