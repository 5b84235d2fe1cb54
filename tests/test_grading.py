"""Tests of the grading plugin (transformer_spec/pytest_plugin/grading.py): rubric, points, results.json.

Runs of the real suite are in-process (``pytest.main``) on small selections; the harness's
mechanics (hidden tests, skips, interruption, unimportable submissions) run on tiny synthetic
test files through ``pytester``. The one full run on the reference is shared by a module fixture.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from transformer_spec.catalogue.patching import write_patched_reference
from transformer_spec.contract import tracks
from transformer_spec.scoring import rubric as rubrics

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent

#: Gradescope's results.json, from its autograder specification
#: (https://gradescope-autograders.readthedocs.io/en/latest/specs/#output-format).
FORMATS = ["text", "html", "simple_format", "md", "ansi"]
VISIBILITY = ["hidden", "after_due_date", "after_published", "visible"]
GRADESCOPE_SCHEMA = {
    "type": "object",
    "required": ["score", "execution_time", "output", "tests"],
    "additionalProperties": False,
    "properties": {
        "score": {"type": "number"},
        "execution_time": {"type": "number", "minimum": 0},
        "output": {"type": "string"},
        "output_format": {"enum": FORMATS},
        "test_output_format": {"enum": FORMATS},
        "test_name_format": {"enum": FORMATS},
        "visibility": {"enum": VISIBILITY},
        "stdout_visibility": {"enum": VISIBILITY},
        "extra_data": {"type": "object"},
        "leaderboard": {"type": "array"},
        "tests": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "number", "score", "max_score", "status", "output", "visibility"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "name_format": {"enum": FORMATS},
                    "number": {"type": "string", "pattern": r"^\d+(\.\d+)*$"},
                    "score": {"type": "number", "minimum": 0},
                    "max_score": {"type": "number", "minimum": 0},
                    "status": {"enum": ["passed", "failed"]},
                    "output": {"type": "string"},
                    "output_format": {"enum": FORMATS},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "visibility": {"enum": VISIBILITY},
                    "extra_data": {"type": "object"},
                },
            },
        },
    },
}


def grade(tmp_path: Path, *args: str, impl: str = "reference") -> tuple[int, dict]:
    """Run pytest in-process on the repository's suite; returns (exit code, results.json)."""
    out = tmp_path / f"results_{len(list(tmp_path.glob('results_*.json')))}.json"
    code = pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", str(REPO), "--impl", impl,
                        "--grade-json", str(out), *args])
    return int(code), json.loads(out.read_text())


def by_component(results: dict) -> dict[str, tuple[float, float]]:
    table: dict[str, list[float]] = {}
    for t in results["tests"]:
        comp = t["tags"][0]
        earned, possible = table.setdefault(comp, [0.0, 0.0])
        table[comp] = [earned + t["score"], possible + t["max_score"]]
    return {c: (round(e, 6), round(p, 6)) for c, (e, p) in table.items()}


# ------------------------------------------------------------------------------------------------
# The rubric
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("track", tracks.names())
def test_default_rubric_gives_every_component_points_summing_to_100(track):
    """Every component but the optional ones (graded only where a rubric gives them points)."""
    rubric = rubrics.load_rubric(track=track)
    assert set(rubric.components) == {c.name for c in tracks.components(track) if not c.optional}
    assert rubric.total == 100
    assert all(p > 0 for p in rubric.components.values())


OPTIONAL_LAWS = str(REPO / "properties/modern/test_optimizer_laws.py")


def test_optional_components_are_left_out_unless_the_rubric_gives_them_points(tmp_path):
    """The modern track's training utilities: the track's rubric leaves their tests out (said once in the
    results' output); a rubric that gives adamw points grades adamw's tests and leaves the others out."""
    code, results = grade(tmp_path, "--track", "modern", OPTIONAL_LAWS)
    assert code == 5 and results["tests"] == []  # nothing graded: pytest's "no tests ran"
    assert "11 test(s) of optional components left out" in results["output"]
    assert "grad_clip (3), adamw (5), lr_schedule (3)" in results["output"]
    rubric = tmp_path / "r.toml"
    rubric.write_text(rubrics.with_optional_text("modern").replace("grad_clip = 4", "grad_clip = 0")
                      .replace("lr_schedule = 3", "lr_schedule = 0"))
    code, results = grade(tmp_path, "--track", "modern", "--rubric", str(rubric), OPTIONAL_LAWS)
    assert code == 0 and by_component(results) == {"adamw": (6.0, 6.0)}
    assert "6 test(s) of optional components left out" in results["output"]


def test_a_rubric_without_a_components_table_leaves_the_optional_components_out():
    defaults = rubrics.rubric_from_text("drop = []", track="modern").components
    assert "adamw" not in defaults and defaults["rmsnorm"] == 10
    whole = rubrics.rubric_from_text(rubrics.with_optional_text("modern"), track="modern")
    assert whole.components["adamw"] == 6 and whole.total == 124
    assert rubrics.with_optional_text("classic") is None


@pytest.mark.parametrize("data, message", [
    ({"components": {"attention": 10, "attentoin": 5}}, "unknown component 'attentoin'"),
    ({"components": {"attention": -1}}, "[components] attention must be a number >= 0"),
    ({"components": {"attention": 10}, "weights": {}}, "unknown key(s) 'weights'"),
    ({"components": {}}, "[components] must be a table"),
    ({"components": {"attention": 10}, "drop": "spec_tests"}, "`drop` must be a list of strings"),
    ({"components": {"attention": 10}, "forbidden": ["torch.nn.NoSuchLayer"]}, "'torch.nn.NoSuchLayer'"),
])
def test_bad_rubric_says_which_entry(data, message):
    with pytest.raises(rubrics.RubricError) as excinfo:
        rubrics.parse_rubric(data, "my.toml")
    assert message in str(excinfo.value) and "my.toml" in str(excinfo.value)


def test_rubric_file_that_is_not_toml(tmp_path):
    bad = tmp_path / "r.toml"
    bad.write_text("[components\nattention = 1\n")
    with pytest.raises(rubrics.RubricError, match="not valid TOML"):
        rubrics.load_rubric(bad)


def test_unknown_test_names_are_errors_that_name_the_test(tmp_path):
    (tmp_path / "spec_tests").mkdir()
    (tmp_path / "spec_tests" / "test_a.py").write_text("")
    collected = {"spec_tests/test_a.py::test_one[float32]": "attention", "tests/test_x.py::test_y": None}
    ok = rubrics.parse_rubric({"components": {"attention": 10}, "tests": {"spec_tests/test_a.py::test_one": 2},
                               "hidden": ["errors", "spec_tests/test_a.py"],
                               "drop": ["spec_tests/test_b_not_collected.py"]}, "r.toml")
    (tmp_path / "spec_tests" / "test_b_not_collected.py").write_text("")
    rubrics.check_rubric_against(ok, collected, tmp_path)  # a file not collected in this run cannot be checked
    cases = [
        ({"tests": {"spec_tests/test_a.py::test_two": 1}}, "unknown test 'spec_tests/test_a.py::test_two'"),
        ({"drop": ["spec_tests/test_nope.py::test_one"]}, "there is no file spec_tests/test_nope.py"),
        ({"hidden": ["attentoin"]}, "unknown test 'attentoin' (nor a component)"),
        ({"tests": {"tests/test_x.py::test_y": 1}}, "not a graded test"),
    ]
    for extra, message in cases:
        rubric = rubrics.parse_rubric({"components": {"attention": 10}, **extra}, "r.toml")
        with pytest.raises(rubrics.RubricError) as excinfo:
            rubrics.check_rubric_against(rubric, collected, tmp_path)
        assert message in str(excinfo.value)


def test_rounded_points_add_up_to_the_component_exactly():
    raw = {f"t{i}": 14 / 66 for i in range(66)}
    rounded = rubrics.round_within(raw)
    assert round(sum(rounded.values()), 9) == 14
    assert set(rounded.values()) == {0.2121, 0.2122} and all(abs(rounded[n] - raw[n]) < 1e-4 for n in raw)
    graded = {f"a.py::t{i}": "attention" for i in range(66)} | {f"m.py::t{i}": "masks" for i in range(7)}
    points, _ = rubrics.assign_points(rubrics.parse_rubric({"components": {"attention": 14, "masks": 6}}), graded)
    assert round(sum(v for n, v in points.items() if n.startswith("m.py")), 9) == 6


def test_points_are_shared_within_a_component_with_overrides_and_drops():
    graded = {
        "a.py::t1": "attention", "a.py::t2[x]": "attention", "a.py::t2[y]": "attention", "a.py::t3": "attention",
        "m.py::t1": "masks", "m.py::t2": "masks",
    }
    rubric = rubrics.parse_rubric({"components": {"attention": 10, "masks": 4},
                                   "tests": {"a.py::t2": 6}, "drop": ["m.py::t2"]})
    points, dropped = rubrics.assign_points(rubric, graded)
    assert dropped == ["m.py::t2"]
    assert points == {"a.py::t1": 2, "a.py::t2[x]": 3, "a.py::t2[y]": 3, "a.py::t3": 2, "m.py::t1": 4}
    too_many = rubrics.parse_rubric({"components": {"attention": 5}, "tests": {"a.py::t1": 6}})
    with pytest.raises(rubrics.RubricError, match="sum to 6, more than the component's 5"):
        rubrics.assign_points(too_many, graded)


# ------------------------------------------------------------------------------------------------
# The real suite
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def reference_results(tmp_path_factory):
    return grade(tmp_path_factory.mktemp("ref"), "spec_tests", "properties")


def test_reference_scores_100_and_results_json_follows_gradescope_schema(reference_results):
    code, results = reference_results
    assert code == 0
    jsonschema.validate(results, GRADESCOPE_SCHEMA)
    assert results["score"] == pytest.approx(100)
    # The parts add up to the rubric's total exactly (Gradescope adds up the max_scores as written).
    assert round(sum(t["max_score"] for t in results["tests"]), 9) == 100
    for comp, points in rubrics.load_rubric().components.items():
        assert round(sum(t["max_score"] for t in results["tests"] if t["tags"] == [comp]), 9) == points, comp
    assert {t["tags"][0] for t in results["tests"]} == set(tracks.component_names("classic")), "every component has tests"
    assert all(t["status"] == "passed" and t["output"] == "" for t in results["tests"])
    assert "scored 100 / 100" in results["output"]
    numbers = [t["number"] for t in results["tests"]]
    assert len(set(numbers)) == len(numbers)


def test_broken_submission_loses_points_in_its_component_only(tmp_path):
    # GELU replaced by ReLU: only the feed-forward's own tests can tell.
    pkg = write_patched_reference(tmp_path, [("feedforward.py", "F.gelu(", "F.relu(")], "relu_ffn")
    code, results = grade(tmp_path, "spec_tests/test_torch_oracle.py", "-k", "feed_forward or sdpa", impl=str(pkg))
    assert code == 1
    table = by_component(results)
    earned, possible = table["ffn"]
    assert earned == 0 < possible
    assert table["attention"][0] == table["attention"][1] > 0
    failed = [t for t in results["tests"] if t["status"] == "failed"]
    assert failed and all("values differ" in t["output"] and "Reproduce: pytest --impl" in t["output"]
                          for t in failed)


def test_missing_name_says_which_contract_row(tmp_path):
    sub = tmp_path / "only_masks.py"
    sub.write_text("import torch\n\ndef causal_mask(seq_len, device=None):\n"
                   "    return torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool, device=device), 1)\n")
    _, results = grade(tmp_path, "spec_tests/test_contract_basics.py", "-k", "name_is_defined", impl=str(sub))
    by_name = {t["name"].split("[")[-1].rstrip("]"): t for t in results["tests"]}
    assert by_name["causal_mask"]["status"] == "passed"
    missing = by_name["FeedForward"]
    assert missing["score"] == 0
    assert "`FeedForward` is not defined by the submission (component 'ffn')" in missing["output"]
    assert "linear1, linear2" in missing["output"]  # the contract row


def grade_in_subprocess(tmp_path: Path, *args: str, impl: str) -> dict:
    """Like :func:`grade`, in a fresh process as an instructor runs it: an in-process run would
    reuse test modules this outer run imported under its own (random) hypothesis profile."""
    out = tmp_path / f"results_{len(list(tmp_path.glob('results_*.json')))}.json"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--impl", impl,
                    "--grade-json", str(out), *args], cwd=REPO, capture_output=True, timeout=600)
    return json.loads(out.read_text())


def test_same_submission_graded_twice_gives_identical_reports(tmp_path):
    pkg = write_patched_reference(tmp_path, [("attention.py", "scale = 1.0 / math.sqrt(q.size(-1))", "scale = 1.0")],
                                  "no_scaling")
    args = ("properties/test_score_variance.py", "spec_tests/test_seed001_worked_example.py")
    first = grade_in_subprocess(tmp_path, *args, impl=str(pkg))
    second = grade_in_subprocess(tmp_path, *args, impl=str(pkg))
    first.pop("execution_time"), second.pop("execution_time")
    for a, b in zip(first["tests"], second["tests"], strict=True):
        assert a == b, f"{a['name']} differs between two runs:\n{a['output']}\n---\n{b['output']}"
    assert first == second
    failing_property = [t for t in first["tests"] if t["status"] == "failed" and "properties/" in t["name"]]
    assert failing_property, "a missing 1/sqrt(d_k) must fail a property"
    text = failing_property[0]["output"]
    # The example is the test's own arguments (d_k, seed), whatever hypothesis prints.
    assert "d_k = " in text and "seed = " in text, text
    assert f'Reproduce: pytest --impl {pkg} "properties/test_score_variance.py::' in text


# ------------------------------------------------------------------------------------------------
# The harness's mechanics, on synthetic tests
# ------------------------------------------------------------------------------------------------
SUBMISSION = '''
import time

def scaled_dot_product_attention(q, k, v=None, mask=None, scale=None):
    return q, k

def causal_mask(seq_len, device=None):
    raise NotImplementedError("causal_mask is not implemented yet")

def padding_mask(tokens, pad_id):
    while True:
        time.sleep(0.05)
'''

SYNTHETIC_TESTS = '''
import pytest

@pytest.mark.component("attention")
def test_passes(impl):
    assert impl.scaled_dot_product_attention(1, 2) == (1, 2)

@pytest.mark.component("attention")
@pytest.mark.hidden
def test_hidden_fails(impl):
    out, _ = impl.scaled_dot_product_attention(1, 2)
    assert out == 3, "expected 3, got 1"

@pytest.mark.component("masks")
def test_stub(impl):
    impl.causal_mask(3)

@pytest.mark.component("masks")
def test_name_exists_but_is_a_stub(impl):
    assert callable(impl.causal_mask)

@pytest.mark.component("errors")
def test_skipped_at_run_time(impl):
    pytest.skip("no GPU here")

def test_not_graded(impl):
    assert False
'''


@pytest.fixture
def synthetic(pytester):
    pytester.makepyfile(test_synthetic=SYNTHETIC_TESTS, submission=SUBMISSION)
    pytester.makefile(".toml", rubric="[components]\nattention = 10\nmasks = 6\nerrors = 4\n")
    return pytester


def run_synthetic(pytester, *args, impl="submission.py", **kwargs):
    result = pytester.runpytest_inprocess(
        "-p", "transformer_spec.pytest_plugin.plugin", "-p", "transformer_spec.pytest_plugin.grading", "-p", "no:cacheprovider",
        "--impl", impl, "--rubric", "rubric.toml", "--grade-json", "r.json", *args, **kwargs,
    )
    return result, json.loads((pytester.path / "r.json").read_text())


def test_synthetic_scores_hidden_tests_stubs_and_skips(synthetic):
    result, results = run_synthetic(synthetic, "-k", "not padding")
    jsonschema.validate(results, GRADESCOPE_SCHEMA)
    tests = {t["name"].split("::")[-1]: t for t in results["tests"]}
    assert set(tests) == {"test_passes", "test_hidden_fails", "test_stub", "test_name_exists_but_is_a_stub",
                          "test_skipped_at_run_time"}, "only tests with a component marker are graded"
    assert tests["test_passes"]["score"] == tests["test_passes"]["max_score"] == 5
    assert tests["test_hidden_fails"]["visibility"] == "after_published"
    assert tests["test_passes"]["visibility"] == "visible"
    assert tests["test_hidden_fails"]["output"].startswith("expected 3, got 1")
    assert "causal_mask is not implemented yet" in tests["test_stub"]["output"]
    assert "passed, but `causal_mask` is not implemented yet" in tests["test_name_exists_but_is_a_stub"]["output"]
    assert tests["test_skipped_at_run_time"]["output"] == "skipped: no GPU here"
    assert results["score"] == 5
    assert "hidden until grades are published" in results["output"]
    # The terminal table.
    result.stdout.fnmatch_lines(["*score of submission.py: 5 / 20*", "attention * 5.00 / 10.00 * 1 / 2",
                                 "masks * 0.00 / 6.00 * 0 / 2", "total * 5.00 / 20.00 * 1 / 5"])


@pytest.mark.parametrize("impl, reason", [
    ("broken.py", "SyntaxError"),
    ("missing.py", "no such file or folder"),
    ("empty.py", "defines none of the contract's names"),
])
def test_a_submission_that_cannot_be_graded_says_so_once_with_the_fix(synthetic, impl, reason):
    synthetic.makepyfile(broken="def f(:\n    pass\n", empty="")
    result, results = run_synthetic(synthetic, "-k", "not padding", impl=impl)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert results["score"] == 0
    assert all(t["score"] == 0 and reason in t["output"] and "Fix: " in t["output"] for t in results["tests"])
    assert reason in results["output"]
    out = result.outlines
    assert len(out) <= 40, "\n".join(out)
    assert sum(reason in line for line in out) == 1, "said once"
    assert sum(line.startswith("Fix: ") for line in out) == 1
    assert not any(line.startswith("Reproduce:") or "FAILED" in line for line in out), "no test ran"


def test_a_terminal_failure_is_short_and_ends_with_its_rerun_command(synthetic):
    result, _ = run_synthetic(synthetic, "-k", "hidden_fails")
    out = result.stdout.str()
    block = out[out.index("expected 3, got 1"):].split("=====")[0].strip().splitlines()
    assert len(block) <= 4 and block[-1] == 'Reproduce: pytest --impl submission.py "test_synthetic.py::test_hidden_fails"'
    assert "def test_hidden_fails" not in out, "the test's source stays out of a student's terminal"
    # Developers keep pytest's own traceback with an explicit --tb (or -vv).
    result, _ = run_synthetic(synthetic, "-k", "hidden_fails", "--tb=long")
    assert "def test_hidden_fails" in result.stdout.str()


def test_passes_that_earn_nothing_are_explained(synthetic):
    result, _ = run_synthetic(synthetic, "-k", "not padding")
    result.stdout.fnmatch_lines(["1 test(s) passed but score 0: 1 use a name that is not implemented yet*"])


PROPERTY_TESTS = '''
import pytest
from hypothesis import given, strategies as st

@pytest.mark.component("attention")
@given(n=st.integers(0, 1000), data=st.data())
def test_property_fails_from_3(impl, n, data):
    word = data.draw(st.sampled_from(["alpha", "beta"]), label="word")
    assert n < 3 or word != "beta", "too big"
'''


def test_a_failing_propertys_smallest_example_is_in_the_terminal_results_json_and_feedback(synthetic):
    from tools import grade as class_grade

    synthetic.makepyfile(test_property=PROPERTY_TESTS)
    result = synthetic.runpytest_subprocess(
        "-p", "transformer_spec.pytest_plugin.plugin", "-p", "transformer_spec.pytest_plugin.grading", "-p", "no:cacheprovider",
        "--impl", "submission.py", "--rubric", "rubric.toml", "--grade-json", "r.json", "test_property.py",
        timeout=300)
    results = json.loads((synthetic.path / "r.json").read_text())
    (test,) = results["tests"]
    # hypothesis shrinks to n = 3 and the word "beta"; shown from the failing call's own arguments.
    expected = ["n = 3", "data.draw #1 (word) = 'beta'"]
    for line in expected:
        assert f"  {line}" in test["output"].splitlines(), test["output"]
        assert f"  {line}" in result.outlines, result.stdout.str()
    record = class_grade.Record("alice", "ok", 0.0, 10.0, {"attention": 0.0}, "", "alice.py", "",
                                [dict(test, score=0.0)])
    feedback = class_grade.feedback_md(record)
    assert all(f"  {line}" in feedback.splitlines() for line in expected), feedback


def test_shrinking_ends_after_its_calls_with_the_latest_failure_and_its_example():
    """A graded property stops shrinking after ``shrink_calls`` calls past its first failure: the
    next call raises NoShrink from the latest failure, whose recorded arguments are the example."""
    from transformer_spec.pytest_plugin import failures

    seen = []

    def inner(n):
        seen.append(n)
        assert n < 3, f"too big: {n}"

    examples = failures.Examples()
    wrapped = failures.wrap_inner_test(inner, (), examples, shrink_calls=2)
    wrapped(n=1)  # passes: no failure yet, no budget spent
    for n in (50, 40):  # the first failure, then one more failing call (a smaller example)
        with pytest.raises(AssertionError):
            wrapped(n=n)
    wrapped(n=0)  # the second call after the first failure: still within the budget
    with pytest.raises(failures.NoShrink) as stopped:
        wrapped(n=30)  # past the budget: runs whole (its draws as before), then ends the shrinking
    assert seen == [1, 50, 40, 0, 30]
    cause = failures.leaf_exception(stopped.value)
    assert str(cause).startswith("too big: 30"), cause
    assert examples.find(cause) == [("n", 30)]
    examples = failures.Examples()
    wrapped = failures.wrap_inner_test(inner, (), examples, shrink_calls=0)
    with pytest.raises(AssertionError):
        wrapped(n=40)
    with pytest.raises(failures.NoShrink) as stopped:
        wrapped(n=1)  # the last call passes: the example is the latest failure's
    assert str(failures.leaf_exception(stopped.value)).startswith("too big: 40")



def test_an_invalid_example_is_not_a_failure_when_shrinking_ends():
    """Issue 27: a call rejected by ``assume()`` while shrinking is no failure: it is neither recorded
    nor, when it is the last call, reported (hypothesis's own ``UnsatisfiedAssumption`` was once the
    message, with the invalid example); the latest real failure and its example are."""
    from hypothesis.errors import UnsatisfiedAssumption

    from transformer_spec.pytest_plugin import failures

    def inner(n):
        if n == 7:
            raise UnsatisfiedAssumption()  # what assume(n != 7) raises inside a property
        raise RuntimeError(f"shapes do not match: {n}")

    examples = failures.Examples()
    wrapped = failures.wrap_inner_test(inner, (), examples, shrink_calls=1)
    with pytest.raises(RuntimeError):
        wrapped(n=40)
    with pytest.raises(UnsatisfiedAssumption):
        wrapped(n=7)  # within the budget: hypothesis's to handle, as without the wrapper
    with pytest.raises(failures.NoShrink) as stopped:
        wrapped(n=7)  # the last call is invalid: the example is the latest failure's
    cause = failures.leaf_exception(stopped.value)
    assert isinstance(cause, RuntimeError) and str(cause) == "shapes do not match: 40"
    assert examples.find(cause) == [("n", 40)]

DRAWING_PROPERTY = '''
import pytest
from hypothesis import given, strategies as st

@pytest.mark.component("attention")
@given(n=st.integers(0, 10**6), data=st.data())
def test_fails_almost_always(impl, n, data):
    xs = data.draw(st.lists(st.integers(0, 1000), min_size=1, max_size=30), label="xs")
    assert n < 2, f"too big: {n} {len(xs)}"
'''


def test_a_property_drawing_inside_the_test_shows_its_example_when_shrinking_ends(synthetic):
    """Issue 27: a property that draws with ``st.data()`` and shrinks past its budget once failed
    with hypothesis's own ``FlakyStrategyDefinition`` ("stopped drawing earlier") and no example."""
    synthetic.makepyfile(test_drawing=DRAWING_PROPERTY)
    synthetic.runpytest_subprocess(
        "-p", "transformer_spec.pytest_plugin.plugin", "-p", "transformer_spec.pytest_plugin.grading", "-p", "no:cacheprovider",
        "--impl", "submission.py", "--rubric", "rubric.toml", "--grade-json", "r.json", "test_drawing.py",
        timeout=300)
    (test,) = json.loads((synthetic.path / "r.json").read_text())["tests"]
    assert "Flaky" not in test["output"] and "Inconsistent data generation" not in test["output"], test["output"]
    assert "too big: " in test["output"] and "data.draw #1 (xs) = " in test["output"], test["output"]


def test_a_graded_run_writes_no_hypothesis_patch_files(synthetic):
    """hypothesis writes ``.hypothesis/patches/*.patch`` (``@example`` lines for each failing
    property) when libcst is importable; a graded run does not pay for that. The dev profile's
    run, where they are written, shows the check can fail."""
    from importlib import metadata

    try:
        metadata.version("libcst")
    except metadata.PackageNotFoundError:
        pytest.skip("libcst is not installed: hypothesis writes no patch files anyway")
    synthetic.makepyfile(test_property='''
import pytest
from hypothesis import given, strategies as st

@pytest.mark.component("attention")
@given(n=st.integers(0, 10))
def test_fails_at_once(impl, n):
    assert n < 0, "never"
''')
    common = ("-p", "transformer_spec.pytest_plugin.plugin", "-p", "transformer_spec.pytest_plugin.grading", "-p", "transformer_spec.pytest_plugin.hypothesis_profiles",
              "-p", "no:cacheprovider", "--impl", "submission.py", "--rubric", "rubric.toml", "test_property.py")
    patches = synthetic.path / ".hypothesis" / "patches"
    synthetic.runpytest_subprocess(*common, "--hypothesis-profile", "dev", timeout=300)
    assert list(patches.glob("*.patch")), "control: hypothesis should write a patch in the dev profile"
    shutil.rmtree(synthetic.path / ".hypothesis")
    synthetic.runpytest_subprocess(*common, "--grade-json", "r.json", timeout=300)
    assert (synthetic.path / "r.json").is_file()
    assert not patches.exists() or not list(patches.glob("*.patch"))


def test_results_json_is_written_when_the_run_is_interrupted(synthetic):
    synthetic.makepyfile(test_zz_interrupt='''
import pytest

@pytest.mark.component("errors")
def test_a_interrupt():
    raise KeyboardInterrupt
''')
    _, results = run_synthetic(synthetic, "-k", "not padding", "test_zz_interrupt.py", "test_synthetic.py",
                               no_reraise_ctrlc=True)
    jsonschema.validate(results, GRADESCOPE_SCHEMA)
    assert results["score"] == 0
    not_run = [t for t in results["tests"] if t["output"].startswith("not run: the run was interrupted")]
    assert len(not_run) == len(results["tests"]) == 6  # the interrupted test included


def test_time_limit_stops_starting_tests_and_says_so(synthetic):
    result, results = run_synthetic(synthetic, "-k", "not padding", "--time-limit", "0.000001")
    outputs = [t["output"] for t in results["tests"]]
    assert outputs.count("not run: the run's time limit of 1e-06 s was reached") == len(outputs) - 1
    result.stdout.fnmatch_lines(["*The run's time limit of 1e-06 s was reached; tests not run score 0.*"])


def test_unknown_component_marker_is_a_usage_error(pytester):
    pytester.makepyfile(test_bad='import pytest\n\n@pytest.mark.component("attn")\ndef test_x():\n    pass\n')
    result = pytester.runpytest_inprocess("-p", "transformer_spec.pytest_plugin.plugin", "-p", "transformer_spec.pytest_plugin.grading")
    result.stderr.fnmatch_lines(["*test_bad.py::test_x: @pytest.mark.component('attn') names no component*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_hanging_function_times_out_and_the_run_goes_on(synthetic):
    # A subprocess: pytest-timeout's signal alarm must not be shared with this session's own.
    synthetic.makepyfile(test_hang='''
import pytest

@pytest.mark.component("masks")
@pytest.mark.timeout(1)
def test_hangs(impl):
    impl.padding_mask(None, 0)

@pytest.mark.component("masks")
def test_after(impl):
    pass
''')
    result = synthetic.runpytest_subprocess(
        "-p", "transformer_spec.pytest_plugin.plugin", "-p", "transformer_spec.pytest_plugin.grading", "-p", "no:cacheprovider",
        "-o", "timeout_method=signal", "--impl", "submission.py", "--rubric", "rubric.toml",
        "--grade-json", "r.json", "test_hang.py", timeout=120,
    )
    results = json.loads((synthetic.path / "r.json").read_text())
    tests = {t["name"].split("::")[-1]: t for t in results["tests"]}
    assert tests["test_hangs"]["output"].startswith("timed out after 1 s")
    assert "submission.py" in tests["test_hangs"]["output"]
    assert tests["test_after"]["status"] == "passed"
    result.assert_outcomes(passed=1, failed=1)


def test_timeout_method_is_signal_so_the_run_goes_on():
    """pytest-timeout's 'thread' method ends the whole process; 'signal' fails just the test."""
    import pytest_timeout
    import tomllib

    options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert options.get("timeout_method", pytest_timeout.DEFAULT_METHOD) == "signal"
    assert options["timeout"] == 120


def test_cov_submission_measures_only_the_submission_file(tmp_path):
    """One documented command: coverage of the submission's own file, terminal and HTML."""
    import subprocess
    import sys

    sub = tmp_path / "masks_only.py"
    sub.write_text("import torch\n\n\ndef causal_mask(seq_len, device=None):\n"
                   "    return torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool, device=device), 1)\n\n\n"
                   "def unused():\n    return 1\n")
    (tmp_path / "sibling.py").write_text("x = 1\n")
    html = tmp_path / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--impl", str(sub),
         "spec_tests/test_contract_basics.py", "-k", "name_is_defined and causal_mask", "--cov-submission", str(html)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith(str(tmp_path)) or "reference" in line]
    assert len(rows) == 1 and rows[0].startswith(str(sub)), proc.stdout
    assert rows[0].split()[-1] == "9"  # the missed line: unused()'s body
    assert (html / "index.html").exists()


def test_a_call_that_does_not_fit_the_signature_quotes_the_contract_row(tmp_path):
    # The decoder's forward with its own parameter names (as in some public implementations):
    # the tests pass tgt_mask= by keyword, so the call fails before any line of the block runs.
    pkg = write_patched_reference(tmp_path, [("blocks.py", "def forward(self, x, memory, tgt_mask=None, memory_mask=None):",
                                              "def forward(self, x, memory, trg_mask=None, src_mask=None):\n"
                                              "        tgt_mask, memory_mask = trg_mask, src_mask")], "renamed_decoder")
    code, results = grade(tmp_path, "spec_tests/test_torch_oracle.py", "-k", "decoder_block", impl=str(pkg))
    assert code == 1
    failed = [t for t in results["tests"] if t["status"] == "failed"]
    assert failed, "the decoder oracle tests pass tgt_mask by keyword: the renamed parameters must fail them"
    for t in failed:
        assert "TypeError" in t["output"] and "did not fit its signature" in t["output"], t["output"]
        assert "forward(x, memory, tgt_mask=None, memory_mask=None)" in t["output"], t["output"]


def test_a_students_run_of_their_own_code_takes_the_graders_examples():
    """Issue 44: a student checking their file with the README's command (``--impl mine.py``, no ``--grading``)
    got 79.62 where the grader gave 79.4: one more property example failed under the grading profile. A run of a
    submission now takes the grader's examples and seeds; the project's own runs of the reference keep ``dev``."""
    from transformer_spec.pytest_plugin import hypothesis_profiles as hp

    class Config:
        def __init__(self, **options):
            self.options = options

        def getoption(self, name, default=None):
            return self.options.get(name.lstrip("-").replace("-", "_"), default)

    assert hp.chosen_profile(Config(impl="mine.py")) == hp.GRADING_PROFILE
    assert hp.chosen_profile(Config(impl="reference")) == hp.DEFAULT_PROFILE
    assert hp.chosen_profile(Config(grade_json="r.json")) == hp.GRADING_PROFILE
    assert hp.chosen_profile(Config(impl="mine.py", hypothesis_profile="dev")) == "dev"


def test_every_test_failing_on_one_import_is_an_import_error_not_a_grade():
    """Issue 44: adapters that import their package inside each function, with the package's metadata missing:
    every test failed with PackageNotFoundError and the status was ``ok`` with 0. One import failure under every
    graded test that ran is the run's import error; one test passing (or failing otherwise) keeps the grade."""
    from transformer_spec.results.outcomes import Outcome, common_import_failure

    def outcome(nodeid, ran):
        o = Outcome(nodeid, "attention", 1.0, False)
        o.ran = ran
        return o

    why = ("the submission 'repo' could not be imported: it reads the package metadata of 'pkg'", "add it")
    ran = [outcome("a", "failed"), outcome("b", "failed"), outcome("c", "not run")]
    assert "every graded test failed on it" in common_import_failure(ran, {"a": why, "b": why}).lower() \
        or "Every graded test failed on it" in common_import_failure(ran, {"a": why, "b": why})
    assert common_import_failure([*ran, outcome("d", "passed")], {"a": why, "b": why}) is None
    assert common_import_failure(ran, {"a": why}) is None
    assert common_import_failure(ran, {"a": why, "b": ("another", "fix")}) is None
