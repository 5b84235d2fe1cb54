"""Tests of the forbidden-API guard (transformer_spec/guard/forbidden.py) and of its use in grading."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import runpy
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.adversarial import guard_removals
from transformer_spec import files
from transformer_spec.catalogue.patching import write_patched_reference
from transformer_spec.guard import forbidden, forbidden_names
from transformer_spec.results.outcomes import Kind
from transformer_spec.submission import loader

REPO = Path(__file__).resolve().parent.parent

CHEATER = '''
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.functional import scaled_dot_product_attention as sdpa

def via_module(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)

def via_alias(q, k, v):
    return sdpa(q, k, v)

def swallowed(q, k, v):
    try:
        return F.scaled_dot_product_attention(q, k, v)
    except Exception:
        return q

def build_mha():
    return nn.MultiheadAttention(4, 2)

class MyMHA(nn.MultiheadAttention):
    pass

def lazy_reference():
    import reference
    return reference
'''


@pytest.fixture
def cheater(tmp_path):
    path = tmp_path / "cheater.py"
    path.write_text(CHEATER)
    guard = forbidden.Guard(paths=files.submission_paths(str(path))).install()
    try:
        sub = loader.load(str(path))  # imported after the guard, as in a graded run
        assert sub.error is None, sub.error
        yield sub, guard
    finally:
        guard.uninstall()


def qkv():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(1, 3, 4, generator=g) for _ in range(3)]


@pytest.mark.parametrize("name", ["via_module", "via_alias"])
def test_submission_calling_sdpa_is_stopped_with_the_api_named(cheater, name):
    sub, guard = cheater
    with pytest.raises(forbidden.ForbiddenAPIError) as excinfo:
        sub.get(name)(*qkv())
    message = str(excinfo.value)
    assert "`torch.nn.functional.scaled_dot_product_attention`" in message
    assert "cheater.py:" in message and f"in {name})" in message
    assert [u.api for u in guard.uses] == ["torch.nn.functional.scaled_dot_product_attention"]


def test_a_use_the_submission_swallows_is_still_recorded(cheater):
    sub, guard = cheater
    q, k, v = qkv()
    assert sub.swallowed(q, k, v) is q
    assert len(guard.uses) == 1 and "swallowed" in guard.uses[0].where


def test_constructing_a_forbidden_layer_or_a_subclass_of_it_is_stopped(cheater):
    sub, guard = cheater
    with pytest.raises(forbidden.ForbiddenAPIError, match="`torch.nn.MultiheadAttention`"):
        sub.build_mha()
    with pytest.raises(forbidden.ForbiddenAPIError, match="`torch.nn.MultiheadAttention`"):
        sub.MyMHA(4, 2)  # built from this test file, but the class is the submission's


def test_importing_reference_is_stopped(cheater):
    sub, _ = cheater
    with pytest.raises(forbidden.ForbiddenImport, match="`import reference`"):
        sub.lazy_reference()


def test_the_tests_own_oracle_calls_are_unaffected_inside_the_oracle_region(cheater):
    _, guard = cheater
    q, k, v = qkv()
    with forbidden.oracle():
        out = F.scaled_dot_product_attention(q, k, v)
        assert out.shape == (1, 3, 4)
        layer = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True)  # builds a MultiheadAttention
        assert layer(q).shape == (1, 3, 4)
        import reference  # noqa: F401 - the suite may import anything there

    assert guard.uses == []


def test_outside_the_oracle_region_an_armed_guard_refuses_whatever_the_stack(cheater):
    _, guard = cheater
    with pytest.raises(forbidden.ForbiddenAPIError, match="`torch.nn.TransformerEncoderLayer`"):
        nn.TransformerEncoderLayer(4, 2, 8)  # from this test file: no frame of the submission
    guard.armed = False  # the plugin's choice for the tests it does not grade
    assert F.scaled_dot_product_attention(*qkv()).shape == (1, 3, 4)
    assert len(guard.uses) == 1


def _sdpa_math(q, k, v):
    return torch.ops.aten._scaled_dot_product_attention_math(q, k, v)[0]


def _flash(q, k, v):
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q[None], k[None], v[None])[0][0]  # 4-D only


def _native_mha(q, k, v):
    w = torch.randn(12, 4)
    return torch._native_multi_head_attention(q, q, q, 4, 2, w, torch.zeros(12), w[:4], torch.zeros(4))[0]


def _fused_layer(q, k, v):
    w = torch.randn(12, 4)
    return torch._transformer_encoder_layer_fwd(q, 4, 2, w, torch.zeros(12), w[:4], torch.zeros(4), False, False,
                                                1e-5, torch.ones(4), torch.zeros(4), torch.ones(4), torch.zeros(4),
                                                torch.randn(8, 4), torch.zeros(8), torch.randn(4, 8), torch.zeros(4))


OPERATOR_ROUTES = {
    "C binding": lambda q, k, v: torch._C._nn.scaled_dot_product_attention(q, k, v),
    "aten sdpa": lambda q, k, v: torch.ops.aten.scaled_dot_product_attention(q, k, v),
    "aten math": _sdpa_math,
    "aten flash for cpu": _flash,
    "native multi-head attention": _native_mha,
    "fused encoder layer": _fused_layer,
}


@pytest.mark.parametrize("route", list(OPERATOR_ROUTES))
def test_every_operator_of_the_family_is_refused_in_any_mode_and_thread(cheater, route):
    _, guard = cheater
    call = OPERATOR_ROUTES[route]
    with forbidden.oracle():
        expected = call(*qkv())  # the suite may
    for mode in (contextlib.nullcontext, torch.no_grad, torch.inference_mode):
        with mode(), pytest.raises(forbidden.ForbiddenAPIError, match="through torch's operator `aten::"):
            call(*qkv())
    with ThreadPoolExecutor(1) as pool, forbidden.oracle():  # the window is this thread's only
        with pytest.raises(forbidden.ForbiddenAPIError, match="in thread "):
            pool.submit(call, *qkv()).result()
    assert len(guard.uses) == 4 and expected.shape[-1] == 4


def test_the_operator_guard_keeps_gradients_and_goes_away_on_uninstall(tmp_path):
    q = torch.randn(1, 3, 4, dtype=torch.float64, requires_grad=True)
    plain = torch.autograd.grad(F.scaled_dot_product_attention(q, q, q).sum(), q)[0]
    with forbidden.Guard(paths=[tmp_path]), forbidden.oracle():
        for route in (F.scaled_dot_product_attention, _sdpa_math, _flash):
            guarded = torch.autograd.grad(route(q, q, q).sum(), q)[0]
            torch.testing.assert_close(guarded, plain)
    assert F.scaled_dot_product_attention(q, q, q).shape == (1, 3, 4)  # no guard: anyone may


def test_a_rubric_that_allows_sdpa_allows_its_operators(tmp_path):
    with forbidden.Guard(apis=["torch.nn.MultiheadAttention"], paths=[tmp_path]) as guard:
        assert torch._C._nn.scaled_dot_product_attention(*qkv()).shape == (1, 3, 4)
        with pytest.raises(forbidden.ForbiddenAPIError, match="`aten::_native_multi_head_attention`"):
            _native_mha(*qkv())
    assert len(guard.uses) == 1


def _exec_module(path: Path) -> None:
    spec = importlib.util.spec_from_file_location("_reference_copy", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


def _via_sys_path(path: Path) -> None:
    sys.path.insert(0, str(path.parent))
    try:
        importlib.import_module(path.stem)
    finally:
        sys.path.remove(str(path.parent))


def _via_symlink(path: Path) -> None:
    link = Path(tempfile.mkdtemp()) / "mine.py"
    link.symlink_to(path)
    link.read_text()


BY_PATH = {"read": Path.read_text, "spec_from_file_location": _exec_module, "runpy": lambda p: runpy.run_path(str(p)),
           "sys.path": _via_sys_path, "a symlink": _via_symlink}


@pytest.mark.parametrize("route", list(BY_PATH))
def test_the_reference_opened_by_path_is_refused(cheater, route):
    _, guard = cheater
    with pytest.raises(forbidden.ForbiddenImport, match="its file reference/masks.py, opened by path"):
        BY_PATH[route](REPO / "reference" / "masks.py")
    with forbidden.oracle():
        assert "def causal_mask" in (REPO / "reference" / "masks.py").read_text()
    assert guard.uses and all(u.api == "reference" for u in guard.uses)


def test_symlinks_leaving_a_submission_are_refused_and_links_inside_it_are_not(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .attention import scaled_dot_product_attention\n")
    (pkg / "attention.py").symlink_to(REPO / "reference" / "attention.py")
    sub = loader.load(str(pkg))
    assert sub.error_kind is Kind.FORBIDDEN and "\n" not in sub.error
    assert "attention.py is a symlink to" in sub.error and "outside the submission's folder" in sub.error
    assert "cp -L" in sub.fix
    (pkg / "attention.py").unlink()
    (pkg / "real.py").write_text("def scaled_dot_product_attention(q, k, v, mask=None, scale=None):\n    return q, q\n")
    (pkg / "attention.py").symlink_to(pkg / "real.py")  # inside the package: its own file
    (tmp_path / "link_to_pkg").symlink_to(pkg, target_is_directory=True)  # the target itself may be a link
    assert loader.load(str(tmp_path / "link_to_pkg")).error is None
    assert loader.outside_symlinks(pkg) == []


def test_uninstall_restores_torch(tmp_path):
    original_sdpa, original_init = F.scaled_dot_product_attention, nn.MultiheadAttention.__init__
    with forbidden.Guard(paths=[tmp_path]):
        assert F.scaled_dot_product_attention is not original_sdpa
    assert F.scaled_dot_product_attention is original_sdpa
    assert nn.MultiheadAttention.__init__ is original_init


def test_import_time_use_makes_the_submission_unimportable_with_the_api_named(tmp_path):
    path = tmp_path / "eager.py"
    path.write_text("import reference\nscaled_dot_product_attention = reference.scaled_dot_product_attention\n")
    with forbidden.Guard(paths=files.submission_paths(str(path))):
        sub = loader.load(str(path))
    assert sub.error is not None and "`import reference`" in sub.error and "eager.py:1" in sub.error


def test_the_list_is_configurable_and_checked():
    with forbidden.Guard(apis=["torch.nn.functional.gelu"], paths=[]) as guard:
        assert F.gelu is not F.relu and guard.apis == ("torch.nn.functional.gelu",)
    with pytest.raises(ValueError, match="'torch.nn.functional.no_such_function'"):
        forbidden_names.validate(["torch.nn.functional.no_such_function"])


def test_submission_paths_of_a_file_a_package_and_a_module_name(tmp_path):
    (tmp_path / "mine.py").write_text("")
    (tmp_path / "helper.py").write_text("")
    (tmp_path / "test_mine.py").write_text("")
    assert files.submission_paths(str(tmp_path / "mine.py")) == [tmp_path / "mine.py", tmp_path / "helper.py"]
    assert files.submission_paths(str(REPO / "reference")) == [REPO / "reference"]
    assert files.submission_paths("reference") == [REPO / "reference"]


def test_grading_a_submission_that_calls_sdpa_loses_the_attention_points(tmp_path):
    old = "    weights = F.softmax(scores, dim=-1)  # over the keys: each row sums to 1\n"
    pkg = write_patched_reference(tmp_path, [("attention.py", old, old + "    F.scaled_dot_product_attention(q, k, v)\n")],
                                  "uses_sdpa")
    out = tmp_path / "r.json"
    pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", str(REPO), "--impl", str(pkg), "--grade-json", str(out),
                 "spec_tests/test_torch_oracle.py", "-k", "sdpa or feed_forward"])
    results = json.loads(out.read_text())
    attention = [t for t in results["tests"] if t["tags"] == ["attention"]]
    ffn = [t for t in results["tests"] if t["tags"] == ["ffn"]]
    assert attention and all(t["score"] == 0 for t in attention)
    assert all("forbidden API: the submission used `torch.nn.functional.scaled_dot_product_attention`"
               in t["output"] for t in attention)
    assert ffn and all(t["status"] == "passed" for t in ffn)


def test_the_class_grader_refuses_to_copy_a_symlink_leaving_a_submission(tmp_path):
    from transformer_spec.grader.settings import GradeError
    from transformer_spec.grader.submissions import Entry, copy_submission

    folder = tmp_path / "student"
    folder.mkdir()
    (folder / "transformer.py").symlink_to(REPO / "reference" / "attention.py")
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(GradeError, match="transformer.py is a symlink to .*outside the submission's folder"):
        copy_submission(Entry("student", folder / "transformer.py", folder), dest)
    with pytest.raises(GradeError, match="outside the submission's folder"):
        copy_submission(Entry("student", folder / "transformer.py", folder / "transformer.py"), dest)


def test_a_sealed_process_opens_no_oracle_window(tmp_path):
    """The class grader's re-check child seals the oracle: a submission that opens
    ``forbidden.oracle()`` itself there is still refused (a process of its own: sealing is final)."""
    import subprocess

    code = (
        "import torch, torch.nn.functional as F\n"
        "from transformer_spec.guard import forbidden, forbidden_ops\n"
        "guard = forbidden.Guard(forbidden.DEFAULT_FORBIDDEN, paths=lambda: []).install()\n"
        "q = torch.randn(1, 2, 3)\n"
        "with forbidden.oracle():\n"
        "    F.scaled_dot_product_attention(q, q, q)\n"  # allowed before sealing
        "forbidden_ops.seal()\n"
        "try:\n"
        "    with forbidden.oracle():\n"
        "        F.scaled_dot_product_attention(q, q, q)\n"
        "except forbidden.ForbiddenAPIError:\n"
        "    print('refused')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.stdout.strip() == "refused", done.stdout + done.stderr


@pytest.mark.parametrize("how", list(guard_removals.REMOVALS))
def test_a_guard_removed_from_inside_is_seen_charged_and_put_back(how, tmp_path):
    """The seal kept by the harness is broken by every way of removing the guard; check_seal
    records a use (the test fails as forbidden) and installs the guard again, which catches the
    next call; an untouched guard is intact and records nothing (no honest run is charged)."""
    guard = forbidden.Guard(paths=[tmp_path]).install()
    try:
        seal = guard.seal
        assert guard.broken(seal) is None
        assert guard.check_seal(seal, "during this test") is seal and guard.uses == []
        guard_removals.REMOVALS[how](guard)
        assert guard.broken(seal) is not None, f"{how} is not seen"
        seal = guard.check_seal(seal, "during this test")
        assert [u.message for u in guard.uses] and "guard was removed" in guard.uses[0].message
        assert guard.broken(seal) is None, "the guard is back"
        guard.uses.clear()
        with pytest.raises(forbidden.ForbiddenAPIError):
            torch._C._nn.scaled_dot_product_attention(*qkv())
    finally:
        guard.uninstall()


def test_restore_puts_a_removed_guard_back_without_a_use(tmp_path):
    guard = forbidden.Guard(paths=[tmp_path]).install()
    try:
        seal = guard.seal
        guard.uninstall()
        seal = guard.restore(seal)
        assert guard.broken(seal) is None and guard.uses == []
    finally:
        guard.uninstall()


def test_the_suites_own_formulas_are_not_the_submissions_to_call(tmp_path):
    """Issue 45: adapters calling the grader's own formulas (``spec_tests.modern.formulas``) scored what the
    formulas earn. The suite's packages are refused to the submission's code (imported lazily, as an adapter
    does), whatever the rubric; the suite itself keeps using them (RMSNorm's other tests pass with its own code)."""
    source = (REPO / "tests" / "independent" / "alt_modern.py").read_text()
    old = "        root = torch.sqrt(xw.pow(2).mean(dim=-1, keepdim=True) + self.eps)\n" \
          "        return (xw / root * self.weight.to(work)).to(x.dtype)\n"
    assert old in source
    cheat = tmp_path / "cheat.py"
    cheat.write_text(source.replace(old, "        from spec_tests.modern.formulas import rms_norm\n"
                                         "        return rms_norm(x, self.weight, self.eps)\n"))
    out = tmp_path / "r.json"
    pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", str(REPO), "--impl", str(cheat), "--track", "modern",
                 "--grade-json", str(out), "properties/modern/test_rmsnorm_laws.py", "properties/modern/test_rotary_laws.py"])
    results = json.loads(out.read_text())
    rmsnorm = [t for t in results["tests"] if t["tags"] == ["rmsnorm"]]
    rotary = [t for t in results["tests"] if t["tags"] == ["rotary"]]
    assert rmsnorm and all(t["score"] == 0 for t in rmsnorm), [t["output"][:200] for t in rmsnorm]
    assert any("forbidden API: the submission used `import spec_tests.modern.formulas`" in t["output"] for t in rmsnorm)
    assert rotary and all(t["status"] == "passed" for t in rotary)


def test_a_stand_in_gives_metadata_freely_and_no_answers_through_its_dict():
    """``inspect.getmodule`` (run by ``torch.library`` when a torch module loads lazily under the submission's
    call) reads ``__file__`` of every module in ``sys.modules``: metadata, no use. An answer is refused, so is
    a write (the attack corpus's ``edit_tests`` replaces ``assert_close``), and the stand-in's ``__dict__`` holds
    none."""
    from transformer_spec.guard import forbidden_suite

    class Refusing:
        refused: list = []

        def caller_in_submission(self):
            return "frame"

        def refuse_import(self, module, frame):
            self.refused.append(module)
            raise ImportError(module)

    formulas = importlib.import_module(forbidden_suite.SUITE_MODULES[0] + ".modern.formulas")
    guard = Refusing()
    undo = forbidden_suite.protect(guard)
    try:
        stand = sys.modules[formulas.__name__]
        assert stand is not formulas and stand.__file__ == formulas.__file__ and guard.refused == []
        assert "rms_norm" not in stand.__dict__
        with pytest.raises(ImportError):
            stand.rms_norm
        assert guard.refused == [formulas.__name__]
        real_rms_norm = formulas.rms_norm
        with pytest.raises(ImportError):  # a write (a law's helper replaced) is refused too, the real one kept
            stand.rms_norm = None
        with pytest.raises(ImportError):
            del stand.rms_norm
        assert formulas.rms_norm is real_rms_norm and guard.refused == [formulas.__name__] * 3
    finally:
        undo()
    assert sys.modules[formulas.__name__] is formulas
