"""What the parent decides from what children sent, without starting any: the re-checks' verdicts
(``tools/grade/rechecks.py``), the messages it keeps (``children.ChildRun``) and the records'
MACs (``output.Output``)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tools.grade.children import MAX_MESSAGES, ChildRun
from tools.grade.output import Output
from tools.grade.rechecks import verdicts
from tools.grade.record import Record
from transformer_spec import outcomes, recheck, results_file
from transformer_spec.registry import Recheck

A1 = Recheck("a[1]", "attention", ("t::anchor1",), run=None)
A2 = Recheck("a[2]", "attention", ("t::anchor2",), run=None)
EXPECTED = {"a[1]": {"out": np.arange(4.0)}, "a[2]": {"out": np.ones(3)}}


def answer(name: str, values) -> dict:
    return {"kind": "recheck", "name": name, "arrays": recheck.encode_arrays({"out": np.asarray(values, float)})}


def missing(name: str) -> dict:
    return {"kind": "recheck", "name": name, "error": "NotSubmitted: no MultiHeadAttention", "missing": True}


RIGHT = {"a[1]": answer("a[1]", np.arange(4.0)), "a[2]": answer("a[2]", np.ones(3))}
WRONG_1 = dict(RIGHT, **{"a[1]": answer("a[1]", np.arange(4.0) * 2)})


def decide(got, passed, forged=None):
    return verdicts([A1, A2], got, forged, passed, EXPECTED)


def test_agreeing_rechecks_keep_the_claimed_passes():
    assert decide(RIGHT, {"t::anchor1": "attention", "t::other": "attention"}) == {}


def test_a_contradicted_anchor_is_tampering():
    v = decide(WRONG_1, {"t::anchor1": "attention", "t::other": "attention"})["attention"]
    assert v.contradicted and "a[1]" in v.why and "largest difference" in v.why


def test_disagreement_without_a_claimed_anchor_voids_the_component_without_calling_it_tampering():
    # the forgery that reports every anchor failed and everything else passed
    v = decide(WRONG_1, {"t::other": "attention"})["attention"]
    assert not v.contradicted and "does not agree" in v.message("attention")


def test_passes_with_no_code_behind_them_are_void():
    got = {"a[1]": missing("a[1]"), "a[2]": missing("a[2]")}
    assert decide(got, {"t::other": "attention"})["attention"].contradicted  # the forger that fails the anchors
    assert decide(got, {"t::anchor2": "attention"})["attention"].contradicted


def test_a_partial_submission_keeps_what_it_has():
    assert decide({"a[1]": RIGHT["a[1]"], "a[2]": missing("a[2]")}, {"t::anchor1": "attention"}) == {}


@pytest.mark.parametrize("got, forged, why", [({}, None, "ended before answering"),
                                              (RIGHT, "a report frame with a wrong signature", "wrong signature"),
                                              ({"a[1]": {"kind": "recheck", "name": "a[1]", "arrays": "junk"},
                                                "a[2]": RIGHT["a[2]"]}, None, "unreadable answer")])
def test_no_answer_a_forged_stream_or_junk_void_the_component(got, forged, why):
    v = decide(got, {"t::anchor1": "attention"}, forged)["attention"]
    assert why in v.why and v.contradicted


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
