"""The mutmut score of ``reference/``: run mutmut in a scratch copy and check every survivor.

    python -m tools.mutation_score --run            # git archive HEAD -> scratch copy, mutmut run, score
    python -m tools.mutation_score --dir /tmp/mm    # score a run already done in /tmp/mm
    python -m tools.mutation_score --dir /tmp/mm --json score.json
    python -m tools.mutation_score --dir /tmp/mm --diffs docs/mutation/survivors.txt
    python -m tools.mutation_score --run --modules rmsnorm rotary swiglu gqa llama_block minillama

The score counts only mutants that some behaviour of the contract can tell apart:

    score = killed / (all mutants - listed equivalents)

``docs/mutation/equivalent.txt`` lists the equivalent mutants, one per line with a one-line
reason (``name: reason``). Exit status 1 if the score is below ``--min`` (95 %), if a survivor
is neither killed nor listed, if a listed mutant was in fact killed or no longer exists (a
stale line), or if a mutant ended in another state (timeout, segfault, not checked).
``--modules`` mutates (with ``--run``) and scores only those modules of ``reference/`` (mutmut's
``only_mutate``); the listed equivalents of other modules are then left out of the score.
``--run`` takes about 40 minutes on 2 cores (1633 mutants: 2262 s on an idle machine); mutmut needs one
torch thread per forked mutant (``OMP_NUM_THREADS=1``, set here).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from .cli import Parser, run_main

REPO = Path(__file__).resolve().parent.parent
EQUIVALENTS = REPO / "docs" / "mutation" / "equivalent.txt"
MUTMUT_VERSION = "3.8.1"

_RESULT = re.compile(r"^\s*(?P<name>\S+): (?P<status>[a-z][a-z ]*?)\s*$")


class ScoreError(Exception):
    """A usage problem (a missing folder, a malformed list): one line that says how to fix it."""


@dataclass
class Score:
    total: int
    killed: int
    equivalent: int
    unexplained: list[str] = field(default_factory=list)  # survived, not listed
    stale: list[str] = field(default_factory=list)  # listed, but killed or unknown
    other: dict[str, str] = field(default_factory=dict)  # timeout, not checked, ...
    minimum: float = 95.0

    @property
    def countable(self) -> int:
        return self.total - self.equivalent

    @property
    def percent(self) -> float:
        return 100.0 * self.killed / self.countable if self.countable else 100.0

    @property
    def ok(self) -> bool:
        return self.percent >= self.minimum and not self.unexplained and not self.stale and not self.other

    def report(self) -> str:
        lines = [
            f"mutants: {self.total}; killed {self.killed}; equivalent (listed) {self.equivalent}; "
            f"survived unexplained {len(self.unexplained)}; other states {len(self.other)}",
            f"score: {self.killed} / {self.countable} non-equivalent mutants killed = {self.percent:.1f} % "
            f"(target {self.minimum:g} %); {100.0 * self.killed / self.total:.1f} % of all mutants"
            if self.total else "score: no mutants",
        ]
        if self.unexplained:
            lines.append("survivors neither killed nor listed in equivalent.txt (add a test, or a line with a reason):")
            lines += [f"  {n}   (mutmut show {n})" for n in self.unexplained]
        if self.stale:
            lines.append("listed as equivalent but killed or unknown to this run (remove the line):")
            lines += [f"  {n}" for n in self.stale]
        if self.other:
            lines.append("mutants in another state (re-run `mutmut run` to finish them):")
            lines += [f"  {n}: {s}" for n, s in sorted(self.other.items())]
        lines.append("OK" if self.ok else "FAILED")
        return "\n".join(lines)


def parse_results(text: str) -> dict[str, str]:
    """``mutmut results --all true`` output -> ``{mutant name: status}``."""
    statuses = {}
    for line in text.splitlines():
        m = _RESULT.match(line)
        if m and "__mutmut_" in m["name"]:
            statuses[m["name"]] = m["status"]
    return statuses


def load_equivalents(path: Path = EQUIVALENTS) -> dict[str, str]:
    """``name: reason`` lines (``#`` comments and blank lines skipped) -> ``{name: reason}``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ScoreError(f"--equivalents {path}: cannot read it ({exc.strerror}); pass the list's path") from None
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, _, reason = line.partition(": ")
        name = name.strip()
        if "__mutmut_" not in name or not reason.strip():
            raise ScoreError(f"--equivalents {path}, line {number}: expected '<mutant name>: <reason>', "
                             f"got {line.strip()[:80]!r}")
        if name in found:
            raise ScoreError(f"--equivalents {path}, line {number}: {name} is listed twice")
        found[name] = reason.strip()
    return found


def score(statuses: dict[str, str], equivalents: dict[str, str], minimum: float = 95.0) -> Score:
    """Combine a run's statuses with the equivalent list."""
    survived = {n for n, s in statuses.items() if s == "survived"}
    killed = {n for n, s in statuses.items() if s == "killed"}
    other = {n: s for n, s in statuses.items() if s not in ("survived", "killed")}
    listed = set(equivalents)
    return Score(
        total=len(statuses),
        killed=len(killed),
        equivalent=len(listed & survived),
        unexplained=sorted(survived - listed),
        stale=sorted(listed - survived),
        other=other,
        minimum=minimum,
    )


def module_of(name: str) -> str:
    """``reference.gqa.xǁGroupedQueryAttentionǁforward__mutmut_1`` -> ``gqa``."""
    return name.split(".")[1] if name.count(".") >= 2 else ""


def only_modules(equivalents: dict[str, str], modules: list[str] | None) -> dict[str, str]:
    """The equivalents of ``modules`` only (all of them when ``modules`` is None)."""
    if modules is None:
        return equivalents
    return {n: r for n, r in equivalents.items() if module_of(n) in modules}


def set_only_mutate(folder: Path, modules: list[str]) -> None:
    """Write mutmut's ``only_mutate`` (``reference/<module>.py`` each) into the scratch copy's pyproject.toml."""
    for m in modules:
        if not (folder / "reference" / f"{m}.py").is_file():
            raise ScoreError(f"--modules {m}: no reference/{m}.py; give module names such as gqa or rmsnorm")
    path = folder / "pyproject.toml"
    text = path.read_text(encoding="utf-8")
    if "\n[tool.mutmut]\n" not in text:
        raise ScoreError(f"{path}: no [tool.mutmut] table to restrict")
    files = ", ".join(f'"reference/{m}.py"' for m in modules)
    path.write_text(text.replace("\n[tool.mutmut]\n", f"\n[tool.mutmut]\nonly_mutate = [{files}]\n", 1), encoding="utf-8")


def mutmut_results(folder: Path) -> dict[str, str]:
    if not (folder / "mutants").is_dir():
        raise ScoreError(f"--dir {folder}: no mutants/ folder there; run `mutmut run` in it first, or use --run")
    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=folder,
                         capture_output=True, text=True)
    if out.returncode:
        raise ScoreError(f"--dir {folder}: `mutmut results` failed: {out.stderr.strip()[-300:]}")
    return parse_results(out.stdout)


def survivor_diffs(folder: Path, names: list[str]) -> str:
    """``mutmut show`` of each mutant in ``names`` (the diff against the reference), concatenated."""
    parts = []
    for name in names:
        out = subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=folder,
                             capture_output=True, text=True)
        diff = [ln for ln in out.stdout.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
        parts.append(f"== {name}\n" + "\n".join(diff or [out.stdout.strip() or out.stderr.strip()]))
    return "\n".join(parts) + "\n"


def scratch_copy(dest: Path, repo: Path = REPO, rev: str = "HEAD") -> Path:
    """``git archive rev`` of the repository unpacked into ``dest`` (committed files only)."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", rev], capture_output=True)
    if archive.returncode:
        raise ScoreError(f"--rev {rev}: git archive failed: {archive.stderr.decode().strip()[-200:]}")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def run_mutmut(folder: Path, jobs: int, log) -> float:
    """``mutmut run`` in ``folder`` with one torch thread per mutant; returns the wall time."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(jobs)],
                          cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode not in (0, 1):  # mutmut exits 1 when some mutants survive
        raise ScoreError(f"mutmut run in {folder} exited {proc.returncode}; see its log")
    return time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m tools.mutation_score", description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--run", action="store_true", help="copy the committed tree to a scratch folder and run mutmut")
    where.add_argument("--dir", type=Path, help="score the mutmut run already done in this folder")
    parser.add_argument("--rev", default="HEAD", help="with --run: the git revision to copy (default HEAD)")
    parser.add_argument("--scratch", type=Path, help="with --run: the scratch folder (default: a new temp folder)")
    parser.add_argument("--jobs", "-j", type=int, default=2, help="with --run: mutants in parallel (default 2)")
    parser.add_argument("--equivalents", type=Path, default=EQUIVALENTS, help="the list of equivalent mutants")
    parser.add_argument("--modules", nargs="+", metavar="NAME",
                        help="only these modules of reference/ (e.g. rmsnorm gqa): mutated with --run, and scored")
    parser.add_argument("--min", type=float, default=95.0, dest="minimum",
                        help="the lowest acceptable score in percent (default 95)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the score as JSON")
    parser.add_argument("--diffs", type=Path, metavar="PATH",
                        help="also write the diff of every surviving mutant (mutmut show) to PATH")
    args = parser.parse_args(argv)
    try:
        if args.jobs < 1:
            raise ScoreError(f"--jobs {args.jobs}: use 1 or more")
        equivalents = only_modules(load_equivalents(args.equivalents), args.modules)
        folder = args.dir
        seconds = None
        if args.run:
            folder = args.scratch or Path(tempfile.mkdtemp(prefix="transformer-spec-mutmut-"))
            if args.scratch and any(folder.iterdir() if folder.is_dir() else ()):
                raise ScoreError(f"--scratch {folder}: not empty; give a new folder (or use --dir to score it)")
            scratch_copy(folder, rev=args.rev)
            if args.modules:
                set_only_mutate(folder, args.modules)
            print(f"mutmut {MUTMUT_VERSION} in {folder} (log: {folder / 'mutmut.log'}); ~40 min on 2 cores",
                  flush=True)
            with open(folder / "mutmut.log", "w") as log:
                seconds = run_mutmut(folder, args.jobs, log)
        statuses = mutmut_results(folder)
        if args.modules:
            statuses = {n: st for n, st in statuses.items() if module_of(n) in args.modules}
        result = score(statuses, equivalents, args.minimum)
    except ScoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if seconds is not None:
        print(f"mutmut run: {seconds:.0f} s wall, {args.jobs} jobs")
    print(result.report())
    if args.diffs:
        survivors = sorted(n for n, s in statuses.items() if s == "survived")
        args.diffs.write_text("# Surviving mutmut mutants of reference/ and their diffs (`python -m tools.mutation_score "
                              "--diffs`);\n# each is either listed in equivalent.txt with its reason, or still to "
                              "classify.\n" + survivor_diffs(folder, survivors))
    if args.json:
        args.json.write_text(json.dumps({**asdict(result), "percent": result.percent, "ok": result.ok,
                                         "seconds": seconds, "folder": str(folder)}, indent=2))
    return 0 if result.ok else 1


if __name__ == "__main__":
    run_main(main)
