"""What the parent decides from what children sent, without starting any: the re-checks' verdicts
(``transformer_spec/grader/rechecks.py``) and what they do to the claimed passes (``decision.apply_verdicts``), the messages it keeps (``children.ChildRun``) and the records'
MACs (``output.Output``)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from transformer_spec.contract.registry import Recheck

from transformer_spec.grader.children import MAX_MESSAGES, ChildRun
from transformer_spec.grader.decision import apply_verdicts
from transformer_spec.grader.output import Output
from transformer_spec.grader.rechecks import Verdicts, verdicts
from transformer_spec.grader.record import Record
from transformer_spec.grader import recheck
from transformer_spec.grader.recheck import PUBLIC, SECRET
from transformer_spec.results import outcomes, results_file
from transformer_spec.results.outcomes import Kind

A1 = Recheck("a[1]", "attention", ("t::anchor1",), run=None, public=0)
A2 = Recheck("a[2]", "attention", ("t::anchor2",), run=None)  # no public replay
EXPECTED = {"a[1]": {"out": np.arange(4.0)}, "a[2]": {"out": np.ones(3)}}
PUBLIC_EXPECTED = {"a[1]": {"out": np.arange(3.0)}}


def answer(name: str, values, mode=SECRET) -> dict:
    return {"kind": "recheck", "name": name, "mode": mode,
            "arrays": recheck.encode_arrays({"out": np.asarray(values, float)})}


def failure(name: str, mode=SECRET, missing=False) -> dict:
    return {"kind": "recheck", "name": name, "mode": mode, "error": "NotSubmitted: no MultiHeadAttention",
            "missing": missing}


RIGHT = {("a[1]", SECRET): answer("a[1]", np.arange(4.0)), ("a[1]", PUBLIC): answer("a[1]", np.arange(3.0), PUBLIC),
         ("a[2]", SECRET): answer("a[2]", np.ones(3))}
PASSED = {"t::anchor1": "attention", "t::anchor2": "attention", "t::other": "attention", "t::ffn": "ffn"}


def decide(got, passed=PASSED, forged=None):
    return verdicts([A1, A2], got, forged, passed, EXPECTED, PUBLIC_EXPECTED)


def graded(v, passed=PASSED) -> dict[str, str]:
    """node id -> kind after the verdicts, for a child that claimed ``passed``."""
    tests = [dict(results_file.test_entry(n, c, "1", 1.0, 1.0, True, "", False), status="passed", kind="passed")
             for n, c in passed.items()]
    apply_verdicts(tests, v)
    return {results_file.nodeid_of(t): t["kind"] for t in tests}


def test_agreeing_rechecks_confirm_the_claimed_passes():
    v = decide(RIGHT)
    assert v.confirmed == {"t::anchor1", "t::anchor2"} and not v.hidden and not v.proof
    assert set(graded(v).values()) == {"passed"}


def test_a_twin_that_disagrees_costs_its_own_test_only_and_accuses_no_one():
    v = decide({**RIGHT, ("a[1]", SECRET): answer("a[1]", np.arange(4.0) * 2)})
    assert not v.proof and "largest difference" in v.hidden["t::anchor1"]
    kinds = graded(v)
    assert kinds.pop("t::anchor1") == Kind.HIDDEN.value and set(kinds.values()) == {"passed"}


@pytest.mark.parametrize("public", [answer("a[1]", np.arange(3.0) + 1, PUBLIC), failure("a[1]", PUBLIC, missing=True)],
                         ids=["other values", "a missing name"])
def test_a_replay_of_the_tests_own_inputs_that_disagrees_is_proof(public):
    v = decide({**RIGHT, ("a[1]", PUBLIC): public})
    assert v.refuted.keys() == {"t::anchor1"} and "own inputs" in v.proof
    kinds = graded(v)
    # untrusted: the confirmed twin counts; a pass of a component with a refuted one does not, nor an unchecked one
    assert kinds == {"t::anchor1": Kind.CONTRADICTED.value, "t::anchor2": "passed",
                     "t::other": Kind.CONTRADICTED.value, "t::ffn": Kind.CONTRADICTED.value}


def test_a_replay_that_uses_a_forbidden_api_proves_a_forbidden_use():
    forbidden = dict(failure("a[1]", PUBLIC), error="ForbiddenAPIError: F.scaled_dot_product_attention", forbidden=True)
    v = decide({**RIGHT, ("a[1]", PUBLIC): forbidden})
    assert v.forbidden.keys() == {"t::anchor1"} and not v.refuted and "Forbidden" in v.proof
    tests = [dict(results_file.test_entry(n, c, "1", 1.0, 1.0, True, "", False), status="passed", kind="passed")
             for n, c in PASSED.items()]
    assert apply_verdicts(tests, v) == {}  # not tampering: the status is forbidden-api
    assert graded(v)["t::anchor1"] == Kind.FORBIDDEN.value and graded(v)["t::anchor2"] == "passed"


@pytest.mark.parametrize("public", [failure("a[1]", PUBLIC), None], ids=["an error", "silence"])
def test_a_replay_that_raises_or_is_silent_proves_nothing(public):
    got = dict(RIGHT)
    got.pop(("a[1]", PUBLIC))
    if public is not None:
        got[("a[1]", PUBLIC)] = public
    v = decide(got)
    assert not v.proof and "t::anchor1" in v.hidden


def test_a_proof_keeps_the_unchecked_passes_of_components_whose_rechecks_confirm():
    v = decide({**RIGHT, ("a[1]", PUBLIC): answer("a[1]", np.arange(3.0) + 1, PUBLIC)},
               {"t::anchor1": "attention", "t::anchor2": "mha", "t::mha_other": "mha"})
    assert graded(v, {"t::anchor1": "attention", "t::anchor2": "mha", "t::mha_other": "mha"}) == \
        {"t::anchor1": Kind.CONTRADICTED.value, "t::anchor2": "passed", "t::mha_other": "passed"}


def test_claims_without_a_twin_count_while_nothing_is_proved():
    v = decide({}, {"t::other": "attention"})
    assert v == Verdicts() and graded(v, {"t::other": "attention"}) == {"t::other": "passed"}


@pytest.mark.parametrize("got, forged, why", [({}, None, "ended before answering"),
                                              ({**RIGHT, ("a[2]", SECRET): {"kind": "recheck", "name": "a[2]",
                                                                           "mode": SECRET, "arrays": "junk"}},
                                               None, "unreadable answer")])
def test_no_answer_or_junk_is_a_hidden_failure(got, forged, why):
    v = decide(got, {"t::anchor2": "attention"}, forged)
    assert why in v.hidden["t::anchor2"] and not v.proof


def test_a_forged_recheck_stream_is_proof_and_confirms_nothing():
    v = decide(RIGHT, forged="a report frame with a wrong signature")
    assert "wrong signature" in v.proof and not v.confirmed
    assert set(graded(v).values()) == {Kind.CONTRADICTED.value}


def test_the_parent_keeps_the_latest_message_of_each_kind_and_nothing_else():
    run = ChildRun()
    run.add([{"kind": outcomes.REPORT, "n": 1}, {"kind": outcomes.REPORT, "n": 2}, {"kind": "junk" * 100}])
    run.add([{"kind": "recheck", "name": f"x{i}"} for i in range(MAX_MESSAGES * 3)])
    assert [m for m in run.messages if m["kind"] == outcomes.REPORT] == [{"kind": outcomes.REPORT, "n": 2}]
    assert len(run.messages) == MAX_MESSAGES and not any(m["kind"].startswith("junk") for m in run.messages)


def _record(student="alice", total=10.0) -> Record:
    test = dict(results_file.test_entry("t::x", "attention", "1.1", 100.0, total, True, "", False), kind="passed")
    return Record(student, "ok", total, 100.0, {"attention": total}, "", "alice.py", "abc", [test])


def test_records_are_signed_and_an_altered_one_is_rejected(tmp_path):
    out = Output(tmp_path)
    out.save(_record("alice"), None, None)
    out.save(_record("bob"), None, None)
    assert (tmp_path / ".grade" / "key").stat().st_mode & 0o077 == 0
    path = tmp_path / "students" / "alice" / "record.json"
    data = json.loads(path.read_text())
    data["total"] = 100.0
    path.write_text(json.dumps(data))
    # bob's genuine record copied over carol's place is another student's record
    (tmp_path / "students" / "carol").mkdir()
    (tmp_path / "students" / "carol" / "record.json").write_text((tmp_path / "students" / "bob" / "record.json").read_text())
    again = Output(tmp_path)
    again.load_records()
    assert set(again.records) == {"bob"} and sorted(again.rejected) == ["alice", "carol"]
    elsewhere = tmp_path / "elsewhere"  # another folder's key does not verify this one's records
    Output(elsewhere).key()
    shutil.copytree(tmp_path / "students", elsewhere / "students")
    other = Output(elsewhere)
    other.load_records()
    assert not other.records and "bob" in other.rejected


def test_an_error_of_the_grader_is_graded_again_and_only_twice_is_a_grader_error(monkeypatch):
    """A grading that raises (a bug of the tool, a fault of the host, the parser's spurious SystemError
    of cpython gh-106905) is never the student's doing: the student is graded once more, and only an
    error that happens again is a ``grader-error`` row (which never stops the batch)."""
    from transformer_spec.grader import batch

    calls = []

    def flaky(entry, ctx):
        calls.append(entry)
        if len(calls) == 1:
            raise SystemError("AST constructor recursion depth mismatch (before=21, after=14)")
        return "the grade", None, None

    monkeypatch.setattr(batch, "grade_entry", flaky)
    assert batch.grade_safely("alice", None) == ("the grade", None, None) and calls == ["alice", "alice"]

    def broken(entry, ctx):
        calls.append(entry)
        raise KeyError("x")

    monkeypatch.setattr(batch, "grade_entry", broken)
    monkeypatch.setattr(batch, "empty_record", lambda entry, ctx, status, detail, subhash: (entry, status, detail))
    calls.clear()
    assert batch.grade_safely("bob", None) == (("bob", "grader-error", "KeyError: 'x' (graded twice)"), None, None)
    assert calls == ["bob", "bob"]
