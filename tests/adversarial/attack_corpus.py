"""The attack corpus of issue 15: hostile submissions beside honest students, each with the grade
its honest code earns (``Expect``); graded by ``tests/test_grade_attacks.py``.

``build_attacks(dest)`` writes the class into ``dest`` and returns ``{student: Expect}``. Names
order the batch (it grades in sorted order): the escapes (``esc_*``) start before the honest
students (``honest_*``, the classmates they attack) are graded, and ``zz_kill_grader`` comes last.

A hostile submission deserves exactly what its code earns without the attack:

* forgers that implement nothing: 0 (``tampering``: a replay refutes a claimed anchor, or the
  passes are claimed for components the files do not define; else the ``import-error`` of an
  empty submission); a forger on the buggy code: at most the buggy grade, plus (when it reports
  every anchor as its code really does, so nothing proves the lie) the tests no re-check checks;
* an escape on top of the buggy code (``base_buggy``, the same code without the attack): exactly
  the buggy grade, status ``ok``; it must leave the honest students at 100 and the batch whole;
* a thief of a classmate's code (it has none of its own): 0;
* a bypass of the forbidden ``F.scaled_dot_product_attention``: what ``bypass_direct`` (the same
  code calling it directly) gets; loading ``reference`` by any route: 0, like importing it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from transformer_spec.catalogue import placeholders
from transformer_spec.catalogue.patching import REFERENCE_DIR, write_patched_reference

from . import attacks
from .corpus import SCALE, Expect, patched_package

KIT = Path(__file__).with_name("escape_kit.py")
INDEPENDENT = Path(__file__).resolve().parent.parent / "independent" / "alt_submission.py"
ALL = ("attention", "mha", "ffn", "encoder", "decoder")
USES_ATTENTION = ("attention", "mha", "encoder", "decoder")

#: escapes on the buggy code: (student, escape_kit action)
ESCAPES = {
    "esc_append_code": "append_code",  # classmates' sandbox copies: only their re-check changes
    "esc_disk_fill": "disk_fill",  # 200 MB outside the sandbox
    "esc_edit_results_in_place": "edit_results_in_place",  # honest records zeroed, size and mtime kept
    "esc_kill_classmates": "kill_classmates",  # SIGKILL of the honest students' children
    "esc_many_procs": "many_procs",  # 50 processes left running
    "esc_pipe_junk": "pipe_junk",  # junk in the honest children's report pipes via /proc/<pid>/fd
    "esc_rewrite_class": "rewrite_class",  # the instructor's class folder rewritten
    "esc_rewrite_outputs": "rewrite_outputs",  # gradebook, records, results.json after the grader exits
    "esc_stop_grader": "stop_grader",  # SIGSTOP of the grader for 30 s while honest students run
    "zz_kill_grader": "kill_grader",  # SIGKILL of the grader
}

FORGERS = {
    "forge_child_report": attacks.FORGE_CHILD_REPORT,
    "forge_child_report_anchors_fail": attacks.FORGE_CHILD_REPORT_ANCHORS_FAIL,
    "forge_report_hook": attacks.FORGE_REPORT_HOOK,
    "forge_channel_send": attacks.FORGE_CHANNEL_SEND,
    "forge_raw_frames": attacks.FORGE_RAW_FRAMES,
}

HONEST = ("honest_reference", "honest_independent")


def _escape(dest: Path, student: str, action: str, prepend: str = "") -> None:
    pkg = patched_package(dest, student, [SCALE], prepend=prepend, append=attacks.escape(action, student))
    shutil.copyfile(KIT, pkg / "_kit.py")


def _honest(dest: Path, ex: dict[str, Expect]) -> None:
    """The classic track's honest students: a copy of the reference and the independent implementation, 100 each."""
    shutil.copytree(REFERENCE_DIR, dest / "honest_reference", ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "honest_independent").mkdir()
    shutil.copyfile(INDEPENDENT, dest / "honest_independent" / "alt_submission.py")
    ex["honest_reference"] = ex["honest_independent"] = Expect("ok", "full")


def _nothing(dest: Path, student: str, code: str) -> None:
    """A package that implements nothing: only the hostile code."""
    (dest / student).mkdir()
    (dest / student / "__init__.py").write_text(code)


def build_attacks(dest: Path, only: set[str] | None = None) -> dict[str, Expect]:
    """Write the class (``only``: these students, plus the honest and baseline ones)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    ex: dict[str, Expect] = {}
    buggy = Expect("ok", "buggy", full=("ffn",), note="the escape's own code is the buggy baseline")

    def want(name: str) -> bool:
        return only is None or name in only

    # Honest students and the baselines the expectations refer to.
    _honest(dest, ex)
    patched_package(dest, "base_buggy", [SCALE])
    ex["base_buggy"] = Expect("ok", "partial", full=("ffn",), note="honest buggy baseline (no 1/sqrt(d_k))")
    write_patched_reference(dest, [("attention.py", attacks.OUTPUT_LINE, attacks.SDPA_ROUTES["direct"])],
                            name="bypass_direct")
    ex["bypass_direct"] = Expect("forbidden-api", "partial", zero=USES_ATTENTION, full=("ffn",),
                                 note="calls F.scaled_dot_product_attention directly: the yardstick of bypasses")

    # Forged passes (items 1, 2).
    for name, code in FORGERS.items():
        if want(name):
            _nothing(dest, name, code)
            ex[name] = Expect(("tampering", "import-error"), "zero", zero=ALL, note="implements nothing")
    if want("forge_child_report_anchors_fail"):
        # Every oracle test has a twin (the unbatched attention cases since fcd604e): reporting each anchor
        # failed, it claims no test at all, an honest 0. The other channels claim every test, anchors too,
        # so each forgery meets a replay that proves it.
        ex["forge_child_report_anchors_fail"] = Expect("ok", "zero", zero=ALL, note="implements nothing, claims nothing")
    if want("forge_buggy_anchors_fail"):
        patched_package(dest, "forge_buggy_anchors_fail", [SCALE], append=attacks.FORGE_CHILD_REPORT_ANCHORS_FAIL)
        # Its code runs and every anchor is reported failed, so no claim is re-checked and nothing
        # proves the lie: it keeps the forged passes of the tests no re-check checks (the residue the
        # rule leaves, docs/class_grading.md), no more; the status stays ok.
        ex["forge_buggy_anchors_fail"] = Expect("ok", "at_most_buggy_and_unchecked",
                                                note="reports its own passing ffn anchor failed: ffn may lose it")
    if want("forge_buggy_recheck_missing"):
        patched_package(dest, "forge_buggy_recheck_missing", [SCALE],
                        append=attacks.FORGE_CHILD_REPORT + attacks.RECHECK_MISSING)
        # every claim forged, every re-check answered "missing": the replays prove the lie (issue 26)
        ex["forge_buggy_recheck_missing"] = Expect("tampering", "at_most_buggy")
    if want("forge_atexit_results"):
        patched_package(dest, "forge_atexit_results", [SCALE],
             prepend="_TS_ME = 'forge_atexit_results'\n" + attacks.ATEXIT_REWRITE)
        ex["forge_atexit_results"] = buggy

    # Escapes (item 4, and item 3 through the paused grader).
    for name, action in ESCAPES.items():
        if want(name):
            _escape(dest, name, action)
            ex[name] = buggy
    if want("esc_read_secrets"):
        patched_package(dest, "esc_read_secrets", [SCALE], prepend=attacks.READ_SECRETS)
        ex["esc_read_secrets"] = Expect("ok", "buggy", full=("ffn",), extra={"log_forbids": (
            "ts-hostile: listed the home folder", "ts-hostile: read the repository")})
    if want("esc_steal_class_folder"):
        _nothing(dest, "esc_steal_class_folder", attacks.STEAL_FROM_CLASS_FOLDER)
        ex["esc_steal_class_folder"] = Expect("import-error", "zero", zero=ALL, note="has no code of its own")
    if want("esc_steal_sandbox"):  # graded among the escapes: it copies whichever classmate runs beside it
        _nothing(dest, "esc_steal_sandbox", attacks.STEAL_FROM_SANDBOX)
        ex["esc_steal_sandbox"] = Expect("import-error", "zero", zero=ALL, note="has no code of its own")

    # Memory held by more processes than one (issue 26): the uid's processes together are watched.
    if want("limit_three_interpreters"):
        patched_package(dest, "limit_three_interpreters", [SCALE], prepend=attacks.MEMORY_INTERPRETERS)
        ex["limit_three_interpreters"] = Expect("memory-limit", "zero", zero=ALL,
                                                note="3 x 550 MB in fresh interpreters, the limit 1500 MB")

    # Huge report frames (item 4).
    if want("big_frames"):
        patched_package(dest, "big_frames", [SCALE], prepend=attacks.BIG_FRAMES)
        ex["big_frames"] = Expect(("ok", "output-limit", "tampering"), "at_most_buggy",
                                  note="40 frames of 15 MB: the grader's memory must stay bounded")

    # Forbidden-API bypasses (item 5).
    for route in ("thread", "fake_filename", "c_nn", "aten_math"):
        name = f"bypass_sdpa_{route}"
        if want(name):
            write_patched_reference(dest, [("attention.py", attacks.OUTPUT_LINE, attacks.SDPA_ROUTES[route])],
                                    name=name)
            ex[name] = Expect("forbidden-api", "partial", zero=USES_ATTENTION, full=("ffn",),
                              extra={"same_as": "bypass_direct"})
    for how in attacks.GUARD_REMOVALS:  # issue 26: the guard removed from inside costs the direct call
        name = f"bypass_guard_removed_{how}"
        if want(name):
            write_patched_reference(dest, [("attention.py", attacks.GUARD_IMPORTS, attacks.GUARD_REMOVALS[how]),
                                           ("attention.py", attacks.OUTPUT_LINE, attacks.GUARD_CALLS[how])], name=name)
            ex[name] = Expect("forbidden-api", "partial", zero=USES_ATTENTION, full=("ffn",),
                              extra={"same_as": "bypass_direct"})
    if want("bypass_sdpa_oracle_window"):
        write_patched_reference(dest, [("attention.py", attacks.OUTPUT_LINE, attacks.SDPA_ROUTES["oracle_window"])],
                                name="bypass_sdpa_oracle_window")
        # inside its own pytest run the window opens; the re-check child is sealed, so the claimed
        # passes of everything using attention are contradicted: the direct call's points, as tampering
        ex["bypass_sdpa_oracle_window"] = Expect(("forbidden-api", "tampering"), "partial", zero=USES_ATTENTION,
                                                 full=("ffn",), extra={"same_as": "bypass_direct"})
    refs = {"bypass_reference_thread": attacks.REFERENCE_FROM_THREAD,
            "bypass_reference_by_path": attacks.REFERENCE_BY_PATH}
    for name, code in refs.items():
        if want(name):
            _nothing(dest, name, code)
            ex[name] = Expect(("forbidden-api", "import-error"), "zero", zero=ALL,
                              note="runs the reference: as `from reference import *`")
    if want("bypass_symlinks"):
        (dest / "bypass_symlinks").mkdir()
        for p in sorted(REFERENCE_DIR.glob("*.py")):
            (dest / "bypass_symlinks" / p.name).symlink_to(p.resolve())
        ex["bypass_symlinks"] = Expect(("forbidden-api", "no-submission", "import-error"), "zero", zero=ALL,
                                       note="its files are symlinks into reference/")
    return ex


#: the tests of the second, smaller class (:func:`build_recheck_attacks`): the anchors of the errors and
#: seq2seq re-checks (the golden argument tests and the Seq2Seq laws), which the oracle tests do not hold
RECHECK_TESTS = ("spec_tests/test_bad_arguments.py", "spec_tests/test_behaviours.py", "properties/test_model_laws.py",
                 "properties/test_seq2seq_padding.py", "properties/test_causality.py")


def build_recheck_attacks(dest: Path) -> dict[str, Expect]:
    """Issue 45's attacks 11 and 12, each beside its control (the same code without the attack) and the
    honest students, graded with :data:`RECHECK_TESTS`. A forger whose code runs keeps at most its
    control's grade plus the tests no re-check checks (the residue of docs/class_grading.md)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    ex: dict[str, Expect] = {}
    _honest(dest, ex)
    # 11: no argument checks; the forger claims every test and, in the re-check child, raises on every call
    for name, append in (("base_no_checks", ""), ("forge_errors_raise_in_recheck",
                                                   attacks.FORGE_CHILD_REPORT + attacks.RAISE_IN_RECHECK)):
        pkg = patched_package(dest, name, append=append)
        validation = pkg / "_validation.py"
        validation.write_text(validation.read_text() + attacks.NO_ARGUMENT_CHECKS)
    ex["base_no_checks"] = Expect("ok", "partial", note="honest: the constructors check no argument")
    ex["forge_errors_raise_in_recheck"] = Expect(("ok", "tampering"), "at_most_buggy_and_unchecked",
                                                 extra={"baseline": "base_no_checks"})
    # 12: Seq2SeqTransformer returns zeros of the right shape (the kill matrix's placeholder); the forger claims
    # every test
    zeros = placeholders.placeholder("seq2seq", "zeros")
    patched_package(dest, "base_seq2seq_zeros", zeros.patches)
    patched_package(dest, "forge_seq2seq_zeros", zeros.patches, append=attacks.FORGE_CHILD_REPORT)
    ex["base_seq2seq_zeros"] = Expect("ok", "partial", note="honest: Seq2SeqTransformer computes nothing")
    ex["forge_seq2seq_zeros"] = Expect(("ok", "tampering"), "at_most_buggy_and_unchecked",
                                       extra={"baseline": "base_seq2seq_zeros"})
    return ex


def build_modern_attacks(dest: Path) -> dict[str, Expect]:
    """Issue 45's attack 2 and the attack after it on the modern track (``--track modern``), beside the honest
    students (the reference and the independent modern implementation): the starter kit unmodified (0) and with
    the report forger (``tampering``, 0: its stubs as loaded prove the claims false); MiniLlama returning zeros
    (the kill matrix's placeholder: its real code runs) and the same with the forger claiming every test (at
    most the placeholder's grade plus the tests no re-check checks)."""
    import subprocess
    import sys

    from tools import mutants
    from transformer_spec.layout import ROOT

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    ex: dict[str, Expect] = {}
    for name, row in (("honest_reference", mutants.REFERENCE), ("honest_independent", mutants.INDEPENDENT)):
        mutants.write_row(row, dest, "modern")
        (dest / row).rename(dest / name)
        ex[name] = Expect("ok", "full")
    kit = dest.parent / "kit"
    subprocess.run([sys.executable, "-m", "tools.release", "--out", str(kit), "--track", "modern"], cwd=ROOT,
                   check=True, capture_output=True)
    shutil.copytree(kit / "my_transformer", dest / "kit_unmodified")
    ex["kit_unmodified"] = Expect("ok", "zero", note="the starter kit: nothing implemented yet")
    shutil.copytree(kit / "my_transformer", dest / "kit_forger")
    init = dest / "kit_forger" / "__init__.py"
    init.write_text(init.read_text() + "\nvars()\n" + attacks.FORGE_CHILD_REPORT_ANCHORS_FAIL)
    ex["kit_forger"] = Expect("tampering", "zero", note="issue 45's attack 2: 92.95 ok before")
    zeros = next(p for p in placeholders.rows(placeholders.components_of("modern", "contract"))
                 if p.component == "minillama")
    for name, forged in (("minillama_zeros", ""), ("minillama_zeros_forger", attacks.FORGE_CHILD_REPORT)):
        mutants.write_row(zeros, dest, "modern")
        (dest / zeros.name).rename(dest / name)
        if forged:
            init = dest / name / f"mutant_{zeros.name}" / "__init__.py"
            init.write_text(init.read_text() + "\n" + forged)
    ex["minillama_zeros"] = Expect("ok", "partial", note="honest: MiniLlama computes nothing")
    ex["minillama_zeros_forger"] = Expect(("tampering", "ok"), "at_most_buggy_and_unchecked",
                                          extra={"baseline": "minillama_zeros"})
    return ex


#: the hostile members (what is not an honest student or a baseline)
def hostile(expect: dict[str, Expect]) -> list[str]:
    return [s for s in expect if s not in (*HONEST, "base_buggy", "bypass_direct")]
