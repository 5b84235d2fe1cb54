"""Every route around the forbidden-API guard loses what the direct call loses (issue 15, item 5).

Each bypass is a copy of the reference whose ``scaled_dot_product_attention`` computes its output
with torch's attention by another route (a thread, code compiled under another file name, the C
binding, an aten operator, the reference imported from a thread or loaded by path, symlinks into
``reference/``). Graded on ``spec_tests/test_torch_oracle.py`` in a child pytest, each must get
exactly the direct call's scores, with the attention tests failed as ``forbidden``; the same
code earns full marks when a rubric allows torch's attention (so the routes do compute the right
values: the zeros come from the guard, not from a wrong answer). Correct code is never flagged:
the reference, the independent implementation, and a submission whose thread does other torch
work score everything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from transformer_spec.catalogue.patching import INDEPENDENT_IMPL, REFERENCE_DIR, write_patched_reference

#: the slow set (conftest.py: run with --slow): a graded run per route around the forbidden-API guard
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
SELECTION = ["spec_tests/test_torch_oracle.py", "-k", "sdpa or feed_forward"]
END = "    return output, weights\n    ### END SOLUTION\n"
WRAP = '''

_honest = scaled_dot_product_attention


def scaled_dot_product_attention(q, k, v, mask=None, scale=None, *, dropout=None):
    output, weights = _honest(q, k, v, mask, scale, dropout=dropout)
    if dropout is None:
        output = _attend(q, k, v, None if mask is None else ~mask, scale)
    return output, weights
'''
FLOAT_MASK = ("    m = None if allowed is None else torch.zeros(allowed.shape, dtype=q.dtype)"
              ".masked_fill(~allowed, float('-inf'))\n")
REF = repr(str(REFERENCE_DIR))
LOAD_REFERENCE = f'''
def _attend(q, k, v, allowed, scale):
    import importlib.util
    from pathlib import Path
    root = Path({REF})
    spec = importlib.util.spec_from_file_location("_ref_copy", root / "__init__.py",
                                                  submodule_search_locations=[str(root)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["_ref_copy"] = mod
    spec.loader.exec_module(mod)
    return mod.scaled_dot_product_attention(q, k, v, None if allowed is None else ~allowed, scale)[0]
'''
EXEC_REFERENCE_SOURCE = f'''
def _attend(q, k, v, allowed, scale):
    ns = {{}}
    for name in ("_validation.py", "attention.py"):
        with open({REF} + "/" + name) as f:
            source = f.read().replace("from ._validation import check_mask, check_tensor", "")
        exec(compile(source, name, "exec"), ns)
    return ns["scaled_dot_product_attention"](q, k, v, None if allowed is None else ~allowed, scale)[0]
'''

#: route -> the text appended to reference/attention.py (after the honest function).
ROUTES = {
    "direct": "\ndef _attend(q, k, v, allowed, scale):\n"
              "    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=scale)\n" + WRAP,
    # map() runs in the thread, called from C: no frame of this file is on the thread's stack.
    "thread": "\nimport functools, threading\n\ndef _attend(q, k, v, allowed, scale):\n    box = []\n"
              "    sdpa = functools.partial(F.scaled_dot_product_attention, attn_mask=allowed, scale=scale)\n"
              "    t = threading.Thread(target=box.extend, args=(map(sdpa, [q], [k], [v]),))\n"
              "    t.start()\n    t.join()\n    return box[0]\n" + WRAP,
    "fake_file_name": '\n_honest = scaled_dot_product_attention\n_SRC = """\n'
                      "def scaled_dot_product_attention(q, k, v, mask=None, scale=None, *, dropout=None):\n"
                      "    output, weights = _honest(q, k, v, mask, scale, dropout=dropout)\n"
                      "    if dropout is None:\n"
                      "        output = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None "
                      "else ~mask, scale=scale)\n"
                      '    return output, weights\n"""\n'
                      'exec(compile(_SRC, "/usr/lib/python3/torch_helper.py", "exec"), globals())\n',
    "c_binding": "\ndef _attend(q, k, v, allowed, scale):\n"
                 "    return torch._C._nn.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=scale)\n"
                 + WRAP,
    "aten_math": "\ndef _attend(q, k, v, allowed, scale):\n" + FLOAT_MASK +
                 "    return torch.ops.aten._scaled_dot_product_attention_math(q, k, v, attn_mask=m, scale=scale)[0]\n"
                 + WRAP,
    "aten_sdpa": "\ndef _attend(q, k, v, allowed, scale):\n"
                 "    return torch.ops.aten.scaled_dot_product_attention.default(q, k, v, attn_mask=allowed, "
                 "scale=scale)\n" + WRAP,
    "reference_from_thread": "\nimport importlib, threading\n\ndef _attend(q, k, v, allowed, scale):\n"
                             "    box = []\n"
                             "    t = threading.Thread(target=box.extend, args=(map(importlib.import_module, "
                             "['reference']),))\n    t.start()\n    t.join()\n"
                             "    return box[0].scaled_dot_product_attention(q, k, v, None if allowed is None "
                             "else ~allowed, scale)[0]\n" + WRAP,
    "reference_by_path": "\nimport sys\n" + LOAD_REFERENCE + WRAP,
    "reference_source_exec": EXEC_REFERENCE_SOURCE + WRAP,
}


def grade(target: Path | str, out: Path, *extra: str) -> dict[str, dict]:
    """``{test name: results.json entry}`` of a graded child run of :data:`SELECTION` on ``target``."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("TRANSFORMER_IMPL", None)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                    "--impl", str(target), "--grade-json", str(out), *extra, *SELECTION],
                   cwd=REPO, env=env, capture_output=True, text=True, timeout=110)
    return {t["name"]: t for t in json.loads(out.read_text())["tests"]}


def cheat(tmp_path: Path, route: str) -> Path:
    return write_patched_reference(tmp_path, [("attention.py", END, END + ROUTES[route])], route)


@pytest.fixture(scope="module")
def direct(tmp_path_factory) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("direct")
    return grade(cheat(tmp, "direct"), tmp / "r.json")


def attention(results: dict[str, dict]) -> dict[str, dict]:
    return {n: t for n, t in results.items() if t["tags"] == ["attention"]}


def test_the_direct_call_loses_the_attention_tests_only(direct):
    assert attention(direct) and all(t["score"] == 0 and t["extra_data"]["kind"] == "forbidden"
                                     for t in attention(direct).values())
    others = [t for t in direct.values() if t["tags"] != ["attention"]]
    assert others and all(t["status"] == "passed" for t in others)


@pytest.mark.parametrize("route", [r for r in ROUTES if r != "direct"])
def test_a_route_around_the_guard_loses_what_the_direct_call_loses(tmp_path, direct, route):
    results = grade(cheat(tmp_path, route), tmp_path / "r.json")
    assert {n: t["score"] for n, t in results.items()} == {n: t["score"] for n, t in direct.items()}
    for name, t in attention(results).items():
        assert t["extra_data"]["kind"] == "forbidden", (name, t["output"])
        assert t["output"].startswith("forbidden API: the submission used `"), t["output"]


@pytest.mark.parametrize("route", ["thread", "aten_math", "fake_file_name"])
def test_the_same_code_earns_full_marks_where_a_rubric_allows_torch_attention(tmp_path, route):
    rubric = tmp_path / "rubric.toml"
    rubric.write_text('forbidden = ["torch.nn.MultiheadAttention"]\n')
    results = grade(cheat(tmp_path, route), tmp_path / "r.json", "--rubric", str(rubric))
    assert results and all(t["status"] == "passed" for t in results.values()), \
        [t["output"] for t in results.values() if t["status"] != "passed"]


def test_a_package_of_symlinks_into_reference_is_refused_in_one_line(tmp_path, direct):
    pkg = cheat(tmp_path, "direct")
    for name in ("attention.py", "_validation.py"):
        (pkg / name).unlink()
        (pkg / name).symlink_to(REFERENCE_DIR / name)
    results = grade(pkg, tmp_path / "r.json")
    assert results and all(t["score"] == 0 for t in results.values())
    assert all(attention(results)[n]["extra_data"]["kind"] == "forbidden" for n in attention(direct))
    message = next(iter(results.values()))["output"]
    assert "is a symlink to" in message and "outside the submission's folder" in message, message


@pytest.mark.parametrize("target", ["reference", str(INDEPENDENT_IMPL)], ids=["reference", "independent"])
def test_correct_code_is_never_flagged(tmp_path, target):
    results = grade(target, tmp_path / "r.json")
    assert results and all(t["status"] == "passed" for t in results.values()), \
        [t["output"] for t in results.values() if t["status"] != "passed"]


def test_a_thread_doing_other_torch_work_is_not_flagged(tmp_path):
    old = "    output = torch.matmul(mixing, v)  # (..., Lq, d_v)\n"
    new = ("    from concurrent.futures import ThreadPoolExecutor\n"
           "    with ThreadPoolExecutor(1) as pool:\n"
           "        output = pool.submit(torch.matmul, mixing, v).result()\n")
    results = grade(write_patched_reference(tmp_path, [("attention.py", old, new)], "threaded"), tmp_path / "r.json")
    assert results and all(t["status"] == "passed" for t in results.values()), \
        [t["output"] for t in results.values() if t["status"] != "passed"]
