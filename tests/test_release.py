"""Tests of the starter-kit tool (tools/release.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import release
from transformer_spec.contract import names as contract
from transformer_spec.submission import loader

REPO = Path(__file__).resolve().parent.parent

SOURCE = '''
class Thing:
    def forward(self, x):
        """Doubles x."""
        if x is None:
            raise ValueError("x must not be None")
        ### BEGIN SOLUTION
        y = x * 2
        return y
        ### END SOLUTION


def helper(x):
    ### BEGIN SOLUTION
    return x
    ### END SOLUTION
'''


def test_strip_solutions_keeps_signature_docstring_validation_and_indentation():
    text, stubbed = release.strip_solutions(SOURCE)
    assert stubbed == ["Thing.forward", "helper"]
    assert "x * 2" not in text and "return x\n" not in text and "SOLUTION" not in text
    assert '        """Doubles x."""\n' in text and 'raise ValueError("x must not be None")' in text
    assert '        raise NotImplementedError("Thing.forward is not implemented yet")\n' in text
    assert '    raise NotImplementedError("helper is not implemented yet")\n' in text
    compile(text, "<kit>", "exec")


@pytest.mark.parametrize("source, message", [
    ("def f():\n    ### BEGIN SOLUTION\n    return 1\n", "never closed"),
    ("def f():\n    return 1\n    ### END SOLUTION\n", "without ### BEGIN SOLUTION"),
    ("### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n", "outside any function"),
    ("def f():\n    ### BEGIN SOLUTION\n    ### BEGIN SOLUTION\n    pass\n", "inside another solution region"),
])
def test_malformed_regions_are_errors_with_the_line(source, message):
    with pytest.raises(release.ReleaseError, match=message):
        release.strip_solutions(source, "x.py")


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    # A package name of its own: the loader caches a package's submodules by the folder's name.
    out = tmp_path_factory.mktemp("kit")
    assert release.main(["--out", str(out), "--name", "starter_kit_under_test"]) == 0
    return out / "starter_kit_under_test"


def test_kit_imports_defines_every_name_and_keeps_no_solution(kit):
    sub = loader.load(str(kit))
    assert sub.error is None
    for name in contract.of_track("classic"):
        assert sub.has(name.name), name.name
    assert not (kit / "rmsnorm.py").exists() and not sub.has("RMSNorm"), "the classic kit has no modern module"
    for src in (REPO / "reference").glob("*.py"):
        if src.stem not in release.kit_modules("classic"):
            continue
        kit_text = (kit / src.name).read_text()
        assert "### BEGIN SOLUTION" not in kit_text
        assert kit_text.count("is not implemented yet") == src.read_text().count("### BEGIN SOLUTION")
    attention = (kit / "attention.py").read_text()
    assert "torch.matmul(q, k.transpose(-2, -1))" not in attention
    assert "def scaled_dot_product_attention(q, k, v, mask=None, scale=None, *, dropout=None):" in attention
    assert "k and v must have the same number of positions" in attention  # validation kept
    assert (kit.parent / "README.md").exists()


def test_existing_output_needs_force(kit, capsys):
    args = ["--out", str(kit.parent), "--name", kit.name]
    assert release.main(args) == 2
    assert "--force" in capsys.readouterr().err
    assert release.main([*args, "--force"]) == 0


def test_kit_scores_0_with_not_implemented_messages_and_no_errors(kit, tmp_path):
    out = tmp_path / "r.json"
    code = pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", str(REPO), "--impl", str(kit),
                        "--grade-json", str(out), "spec_tests/test_contract_basics.py",
                        "properties/test_softmax_rows.py", "spec_tests/test_behaviours.py"])
    assert code == pytest.ExitCode.TESTS_FAILED  # failures, not errors or an internal crash
    results = json.loads(out.read_text())
    assert results["score"] == 0 and results["tests"]
    for t in results["tests"]:
        assert t["score"] == 0
        assert "not implemented yet" in t["output"], t
    # pytest counts some tests as passed (a name exists, a shape check before any stub runs):
    # the summary says why they earn nothing, so "N passed" under a score of 0 is not a puzzle.
    passed = sum(1 for t in results["tests"] if t["output"].startswith("passed, but"))
    assert passed > 0
    assert f"{passed} test(s) passed but score 0: {passed} use a name that is not implemented yet" in results["output"]


@pytest.fixture(scope="module")
def modern_kit(tmp_path_factory):
    out = tmp_path_factory.mktemp("kit")
    assert release.main(["--out", str(out), "--name", "modern_kit_under_test", "--track", "modern"]) == 0
    return out / "modern_kit_under_test"


def test_the_modern_kit_holds_the_modern_names_and_no_classic_class(modern_kit):
    """A modern-track student writes the six modern names and the two classic functions the track
    grades (scaled_dot_product_attention, causal_mask), and none of the classic classes."""
    sub = loader.load(str(modern_kit))
    assert sub.error is None
    for name in contract.of_track("modern"):
        assert sub.has(name.name), name.name
    for name in ("MultiHeadAttention", "TransformerEncoderBlock", "MiniGPT", "Seq2SeqTransformer", "padding_mask"):
        assert not sub.has(name), name
    modules = {p.stem for p in modern_kit.glob("*.py")}
    assert {"rmsnorm", "rotary", "swiglu", "gqa", "llama_block", "minillama", "attention", "masks"} <= modules
    assert not modules & {"multihead", "blocks", "feedforward", "minigpt", "position", "seq2seq"}
    readme = (modern_kit.parent / "README.md").read_text()
    assert f"--impl path/to/{modern_kit.name} --track modern" in readme and "torch.nn.RMSNorm" in readme


def test_the_modern_kit_scores_0_with_not_implemented_messages(modern_kit, tmp_path):
    out = tmp_path / "r.json"
    code = pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", str(REPO), "--impl", str(modern_kit),
                        "--track", "modern", "--grade-json", str(out), "spec_tests/modern/test_golden.py"])
    assert code == pytest.ExitCode.TESTS_FAILED
    results = json.loads(out.read_text())
    assert results["score"] == 0 and results["tests"]
    assert all(t["score"] == 0 for t in results["tests"])
    assert any("not implemented yet" in t["output"] for t in results["tests"])


def test_the_kit_of_an_unknown_track_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        release.main(["--out", str(tmp_path), "--track", "ancient"])
    assert "--track" in capsys.readouterr().err
