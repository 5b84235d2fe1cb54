"""Tests of the forbidden-API guard (transformer_spec/forbidden.py) and of its use in grading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from transformer_spec import forbidden, loader
from transformer_spec.patching import write_patched_reference

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
    guard = forbidden.Guard(paths=forbidden.submission_paths(str(path))).install()
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


def test_the_tests_own_oracle_calls_are_unaffected(cheater):
    _, guard = cheater
    q, k, v = qkv()
    out = F.scaled_dot_product_attention(q, k, v)
    assert out.shape == (1, 3, 4)
    layer = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True)  # builds a MultiheadAttention
    assert layer(q).shape == (1, 3, 4)
    import reference  # noqa: F401 - the tests may import anything

    assert guard.uses == []


def test_uninstall_restores_torch(tmp_path):
    original_sdpa, original_init = F.scaled_dot_product_attention, nn.MultiheadAttention.__init__
    with forbidden.Guard(paths=[tmp_path]):
        assert F.scaled_dot_product_attention is not original_sdpa
    assert F.scaled_dot_product_attention is original_sdpa
    assert nn.MultiheadAttention.__init__ is original_init


def test_import_time_use_makes_the_submission_unimportable_with_the_api_named(tmp_path):
    path = tmp_path / "eager.py"
    path.write_text("import reference\nscaled_dot_product_attention = reference.scaled_dot_product_attention\n")
    with forbidden.Guard(paths=forbidden.submission_paths(str(path))):
        sub = loader.load(str(path))
    assert sub.error is not None and "`import reference`" in sub.error and "eager.py:1" in sub.error


def test_the_list_is_configurable_and_checked():
    with forbidden.Guard(apis=["torch.nn.functional.gelu"], paths=[]) as guard:
        assert F.gelu is not F.relu and guard.apis == ("torch.nn.functional.gelu",)
    with pytest.raises(ValueError, match="'torch.nn.functional.no_such_function'"):
        forbidden.validate(["torch.nn.functional.no_such_function"])


def test_submission_paths_of_a_file_a_package_and_a_module_name(tmp_path):
    (tmp_path / "mine.py").write_text("")
    (tmp_path / "helper.py").write_text("")
    (tmp_path / "test_mine.py").write_text("")
    assert forbidden.submission_paths(str(tmp_path / "mine.py")) == [tmp_path / "mine.py", tmp_path / "helper.py"]
    assert forbidden.submission_paths(str(REPO / "reference")) == [REPO / "reference"]
    assert forbidden.submission_paths("reference") == [REPO / "reference"]


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
