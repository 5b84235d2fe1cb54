"""The kill matrix: run the whole suite on every mistake of the pitfall catalogue and on every allowed variation.

    python -m tools.mutants                     # every row, 2 in parallel; exit 1 on a gap
    python -m tools.mutants --only no_scaling tanh_gelu --show-tests
    python -m tools.mutants --only handwritten_softmax generate_under_no_grad   # variations too
    python -m tools.mutants --json kill_matrix.json
    python -m tools.mutants --diagnose-accuracy # how often diagnose.py names each pitfall

Each pitfall of :mod:`transformer_spec.pitfalls` is applied to a fresh copy of ``reference/``
and graded by one ``pytest spec_tests properties --grade-json`` run (hypothesis profile
``mutation``: few derandomised examples, no shrinking; one torch thread). The failing tests,
grouped by their component, make one row of the matrix. The unpatched reference runs too, and
so does an independently written correct implementation (``tests/independent/alt_submission.py``,
written from the contract alone in another style): a test that fails it over-specifies (a
test that fails only because it uses a name the independent implementation does not define,
a component it does not implement yet, is listed as not covered instead). So
does every allowed variation of :mod:`transformer_spec.variations` (the reference rewritten in
a way the contract leaves free: another dropout placement inside attention, a tied head through
``F.linear``, a hand-written LayerNorm, no KV cache, ...): each is a row that must be clean.

Exit status 1 if the reference, the independent implementation or a variation fails any test, if a pitfall
survives (no test fails), or if a pitfall is killed only outside its own component (the grade
would blame the wrong part).
No early stop: every run goes to the end, so the matrix shows every component that notices.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from transformer_spec import registry
from transformer_spec.outcomes import Kind
from transformer_spec.patching import INDEPENDENT_IMPL, write_patched_reference
from transformer_spec.registry import Pitfall
from transformer_spec.results_file import nodeid_of
from transformer_spec.variations import BY_NAME as VARIATIONS_BY_NAME
from transformer_spec.variations import CATALOGUE as VARIATIONS
from transformer_spec.variations import Variation

REPO = Path(__file__).resolve().parent.parent
REFERENCE = "(reference)"
INDEPENDENT = "(independent)"
CORRECT = {REFERENCE: "reference", INDEPENDENT: str(INDEPENDENT_IMPL)}  # rows that must be clean
PROFILE = "mutation"


@dataclass
class Row:
    """One graded run: which tests failed, by component.

    ``component`` is the pitfall's or variation's component (``None`` for the correct
    implementations); ``must_pass`` marks rows of correct code (the correct implementations and
    the allowed variations), which must fail no test.
    """

    name: str
    component: str | None
    must_pass: bool = False
    failed: dict[str, list[str]] = field(default_factory=dict)
    uncovered: list[str] = field(default_factory=list)  # the independent implementation's missing names' tests
    total: int = 0
    seconds: float = 0.0
    error: str | None = None

    @property
    def killed(self) -> bool:
        return bool(self.failed)

    @property
    def killed_in_own(self) -> bool:
        return self.component in self.failed

    @property
    def verdict(self) -> str:
        if self.error:
            return "ERROR"
        if self.component is None or self.must_pass:
            return "clean" if not self.failed else "CORRECT CODE FAILS"
        if not self.failed:
            return "SURVIVED"
        return "killed" if self.killed_in_own else "KILLED ONLY ELSEWHERE"

    @property
    def ok(self) -> bool:
        return self.verdict in ("clean", "killed")


def suite_command(impl: str, grade_json: str, extra: list[str] | None = None) -> list[str]:
    """The pytest command that grades ``impl`` under the ``mutation`` profile."""
    return [sys.executable, "-m", "pytest", "spec_tests", "properties", "-q", "-p", "no:cacheprovider",
            "--no-header", "--impl", impl, "--grade-json", grade_json, "--hypothesis-profile", PROFILE,
            *(extra or [])]


def suite_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0",
               TRANSFORMER_SPEC_NO_DIAGNOSE="1")
    env.pop("CI", None)  # the profile is chosen explicitly anyway
    return env


def run_one(pitfall: Pitfall | Variation | str, workdir: Path, timeout: float = 600.0) -> Row:
    """Grade one patched copy (a pitfall or an allowed variation), or a correct implementation
    (``REFERENCE``, ``INDEPENDENT``)."""
    correct = isinstance(pitfall, str)
    name = pitfall if correct else pitfall.name
    row = Row(name, None if correct else pitfall.component, must_pass=correct or isinstance(pitfall, Variation))
    start = time.monotonic()
    try:
        if correct:
            impl = CORRECT[name]
        else:
            impl = str(write_patched_reference(workdir / name, pitfall.patches, f"mutant_{name}"))
        out = workdir / f"{name}.json"
        proc = subprocess.run(suite_command(impl, str(out)), cwd=REPO, env=suite_env(),
                              capture_output=True, text=True, timeout=timeout)
        if not out.exists():
            row.error = f"no results.json (exit {proc.returncode}): {(proc.stderr or proc.stdout)[-500:]}"
        else:
            data = json.loads(out.read_text())
            row.total = len(data["tests"])
            for t in data["tests"]:
                if t["status"] != "passed":
                    kind = t["extra_data"]["kind"]
                    if kind == Kind.NOT_RUN:
                        row.error = f"tests not run ({t['output'].splitlines()[0]})"
                    if name == INDEPENDENT and kind == Kind.NOT_SUBMITTED:
                        # a component it does not implement (yet): not covered, not over-specified
                        row.uncovered.append(nodeid_of(t))
                        continue
                    comp = t["tags"][0]
                    row.failed.setdefault(comp, []).append(nodeid_of(t))
            if proc.returncode not in (0, 1):
                row.error = f"pytest exited {proc.returncode}: {proc.stdout[-500:]}"
    except subprocess.TimeoutExpired:
        row.error = f"the suite took over {timeout:g} s"
    except Exception as exc:  # a patch that no longer applies (PatchError) lands here, loudly
        row.error = f"{type(exc).__name__}: {exc}"
    row.seconds = time.monotonic() - start
    return row


def run_all(pitfalls: list[Pitfall], jobs: int = 2, progress=None) -> list[Row]:
    """The correct implementations first in the queue, then each pitfall or variation of ``pitfalls`` (in
    that order); ``jobs`` pytest processes at a time."""
    with tempfile.TemporaryDirectory(prefix="mutants-") as tmp, ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_one, p, Path(tmp)) for p in [*CORRECT, *pitfalls]]
        rows = []
        for f in futures:
            rows.append(f.result())
            if progress:
                progress(rows[-1])
    return rows


def format_matrix(rows: list[Row]) -> list[str]:
    """Rows: correct code, variations, pitfalls; columns: components; a cell is the number of failing
    tests ([n] = the pitfall's own component; a variation's own component is not bracketed, as every
    cell of its row must be ".")."""
    width = max(len(r.name) for r in rows)
    short = {c.name: c.label for c in registry.components()}
    head = f"{'row':<{width}}  {'own':<5}" + "".join(f"{label:>6}" for label in short.values()) + "  verdict"
    lines = [head, "-" * len(head)]
    for r in rows:
        cells = ""
        for c in short:
            n = len(r.failed.get(c, []))
            cell = "." if n == 0 else str(n)
            if c == r.component and not r.must_pass:
                cell = f"[{cell}]"
            cells += f"{cell:>6}"
        own = (short.get(r.component, "-") if r.component else "-") + ("~" if r.must_pass and r.component else "")
        lines.append(f"{r.name:<{width}}  {own:<5}{cells}  {r.verdict}")
    return lines


def _print_row(row: Row) -> None:
    print(f"  {row.verdict:<8} {row.name} ({row.seconds:.1f} s)"
          + (f": {row.error}" if row.error else ""), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.mutants", description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", "-j", type=int, default=2, help="pytest processes in parallel (default 2)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these pitfalls or variations")
    parser.add_argument("--show-tests", action="store_true",
                        help="list every failing test of each pitfall (default: up to 3 of its own component)")
    parser.add_argument("--json", metavar="PATH", help="also write the matrix as JSON")
    parser.add_argument("--list", action="store_true", help="list the pitfalls and the variations, and exit")
    parser.add_argument("--diagnose-accuracy", action="store_true",
                        help="measure how often transformer_spec.diagnose names each pitfall, and exit")
    args = parser.parse_args(argv)

    pitfalls = registry.pitfalls()
    by_name = {p.name: p for p in pitfalls}
    if args.list:
        for p in pitfalls:
            print(f"pitfall    {p.component:<10} {p.name:<40} {p.explanation}")
        for v in VARIATIONS:
            print(f"variation  {v.component:<10} {v.name:<40} {v.explanation}")
        return 0
    if args.diagnose_accuracy:
        from transformer_spec import diagnose

        return diagnose.main([])
    if args.only:
        unknown = [n for n in args.only if n not in by_name and n not in VARIATIONS_BY_NAME]
        if unknown:
            parser.error(f"unknown pitfall(s) or variation(s): {', '.join(unknown)}; see --list")
        chosen = [VARIATIONS_BY_NAME.get(n) or by_name[n] for n in args.only]
        rows_to_run = [c for c in chosen if isinstance(c, Variation)] + [c for c in chosen if not isinstance(c, Variation)]
    else:
        rows_to_run = [*VARIATIONS, *pitfalls]
    n_variations = sum(isinstance(r, Variation) for r in rows_to_run)
    n_pitfalls = len(rows_to_run) - n_variations

    print(f"grading the reference, the independent implementation, {n_variations} allowed variations and "
          f"{n_pitfalls} pitfalls, {args.jobs} at a time (hypothesis profile {PROFILE!r})", flush=True)
    start = time.monotonic()
    rows = run_all(rows_to_run, jobs=max(1, args.jobs), progress=_print_row)
    elapsed = time.monotonic() - start

    print()
    for line in format_matrix(rows):
        print(line)
    print()
    for r in rows:
        if r.must_pass:
            if r.failed:  # correct code that loses points: every failing test, whatever --show-tests says
                print(f"{r.name} (must be clean): " + "; ".join(t for c in registry.names() for t in r.failed.get(c, [])))
            continue
        tests = [t for c in registry.names() for t in r.failed.get(c, [])] if args.show_tests else \
            r.failed.get(r.component, [])[:3]
        if tests:
            print(f"{r.name}: " + "; ".join(tests) + (" ..." if not args.show_tests and
                                                     len(r.failed.get(r.component, [])) > 3 else ""))
    for r in rows:
        if r.uncovered:
            print(f"{r.name}: {len(r.uncovered)} test(s) use names it does not define (not checked for "
                  f"over-specification there), e.g. {r.uncovered[0]}")
    bad = [r for r in rows if not r.ok]
    killed = sum(1 for r in rows if not r.must_pass and r.verdict == "killed")
    clean = sum(1 for r in rows if r.must_pass and r.component is not None and r.verdict == "clean")
    print()
    print(f"{killed} / {n_pitfalls} pitfalls killed inside their own component; "
          f"{clean} / {n_variations} allowed variations clean; "
          f"reference: {rows[0].verdict}; independent implementation: {rows[1].verdict}; "
          f"{elapsed:.0f} s wall time ({args.jobs} jobs)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "seconds": round(elapsed, 1), "jobs": args.jobs,
            "rows": [{"name": r.name, "component": r.component, "must_pass": r.must_pass,
                      "verdict": r.verdict, "error": r.error,
                      "seconds": round(r.seconds, 1), "total": r.total, "failed": r.failed} for r in rows],
        }, indent=2) + "\n")
    for r in bad:
        print(f"FAIL: {r.name}: {r.verdict}" + (f" ({r.error})" if r.error else ""), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
