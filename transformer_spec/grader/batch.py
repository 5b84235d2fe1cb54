"""The batch: every submission of a class (or of one shard) graded in a pool of threads, each in
its own children, with resume; and the merge of the outputs of shards."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import tempfile
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from transformer_spec.contract import registry
from transformer_spec.diagnosis import catalogue as diagnosis_catalogue
from transformer_spec.grader import report, sandbox, tree
from transformer_spec.grader.children import kill_all, stop_new_children
from transformer_spec.grader.decision import empty_record, grade_entry, not_run
from transformer_spec.grader.output import Output, remove_temp_files
from transformer_spec.grader.record import Record
from transformer_spec.grader.settings import RECORD, STATE_DIR, GradeError, Settings
from transformer_spec.grader.submissions import (
    Entry,
    discover,
    hidden_names,
    ignores_case,
    shard_of,
    submission_hash,
)
from transformer_spec.grader.suite import Context, Setup, Suite, collect_skeleton
from transformer_spec.grader.text import file_name
from transformer_spec.grader import recheck
from transformer_spec.results.results_file import format_points


def _components(skeleton: list[dict]) -> list[str]:
    present = {t["tags"][0] for t in skeleton}
    return [c for c in registry.names() if c in present]


def grade_class(submissions: Path, out: Path, settings: Settings, *, jobs: int | None = None,
                resume: bool = False, shard: tuple[int, int] = (1, 1), progress: bool = True,
                class_report: bool = True, only: Path | None = None) -> dict[str, Record]:
    """Grade every submission of ``submissions`` (this shard's part) into ``out``; returns the records.
    ``class_report=False`` writes no ``report.html`` (``tools.grade single``: one student, whose
    output folder is temporary); ``only``: that one submission of the folder ``submissions`` (its parent), graded
    where it lies (copied into its sandbox within the class's limits, never before)."""
    out = out.resolve()
    submissions = submissions.resolve()
    inside = only if only is not None else submissions
    if out == inside or inside in out.parents:
        raise GradeError("--out must not be inside the submissions folder")
    found = discover(submissions, settings.profile_object().adapter, ignores_case(out), only=only)
    skipped = hidden_names(submissions) if only is None else []
    if skipped:
        print(f"warning: not graded, hidden names: {', '.join(skipped[:10])}", file=sys.stderr)
    if not found:
        raise nothing_to_grade(submissions)
    entries = [e for e in found if shard[1] == 1 or shard_of(e.student, shard[1]) == shard[0]]
    for e in entries:
        if e.note:
            print(f"warning: {e.note}", file=sys.stderr)
    class_files = folder_hashes(submissions, only)
    course = settings.profile_object()
    suite = Suite(course_profile=course.origin)
    config = {"fingerprint": settings.fingerprint(suite.sha256), "shard": list(shard)}
    state = out / STATE_DIR
    output = Output(out)
    if out.exists() and any(out.iterdir()):
        old = state / "config.json"
        if not resume:
            raise GradeError(f"{out} is not empty: pass --resume to continue that grading, or choose an empty folder")
        if not old.is_file():
            raise GradeError(f"{out} holds no grading of this tool (no {old}); choose an empty folder")
        if json.loads(old.read_text()) != config:
            raise GradeError(f"{out} was graded with other settings (tests, rubric, limits, suite or shard); "
                             "resume with the same ones, or choose an empty folder")
        remove_temp_files(out)
        output.adopt_existing()
        output.load_records()
        for record in output.records.values():  # what a student reads comes from the verified record
            output.write_derived(record)
        if output.rejected:
            print(f"warning: {len(output.rejected)} record(s) in {file_name(str(out))} did not verify and are graded again: "
                  + ", ".join(file_name(r) for r in output.rejected[:10]), file=sys.stderr)
        _remove_old_tmp_roots(state)
    out.mkdir(parents=True, exist_ok=True)
    output.write(state / "config.json", json.dumps(config, indent=1, sort_keys=True) + "\n")
    tmp_root = Path(tempfile.mkdtemp(prefix="transformer-spec-grade-"))
    os.chmod(tmp_root, 0o711)  # children of the uid tier pass through to their own folder, list nothing
    output.write(state / f"tmp-root-{os.getpid()}.txt", str(tmp_root))
    setup = ThreadPoolExecutor(max_workers=2)  # the setup, and the sandbox's probe
    try:
        ctx = Context(settings, suite, tmp_root, rubric=settings.rubric_object(), seed=secrets.randbelow(2**31 - 1000))
        _prepare(ctx, setup)
        todo = []
        for e in entries:
            rec = output.records.get(e.student)
            if rec is not None and rec.submission_sha256 == submission_hash(e) and rec.status != "grader-error":
                continue
            todo.append(e)
        # Students no longer in the folder (or in another shard) are not in this gradebook.
        keep = {e.student for e in entries}
        output.records = {s: r for s, r in output.records.items() if s in keep}
        jobs = jobs or os.cpu_count() or 1
        pool = ThreadPoolExecutor(max_workers=jobs)
        try:
            pending = {pool.submit(grade_safely, e, ctx) for e in todo}
            # The first children run while the setup finishes; a setup that failed (the suite not
            # collected) stops the batch here, before any record is saved.
            comps = _components(ctx.skeleton)
            output.write(out / "gradebook.csv", output.gradebook(comps))
            bar = _progress(len(entries), len(entries) - len(todo), progress)
            refresh = report.Refresher(out, output.write) if class_report else None
            while pending:
                done, pending = wait(pending, timeout=2.0, return_when=FIRST_COMPLETED)
                output.sweep(protect={tmp_root})  # also while children run: nothing forged stays
                for fut in done:
                    _saved(fut, output, out, comps, bar)
                if done and pending and refresh is not None:  # the last one is written below
                    refresh(output.records)
            if refresh is not None:
                refresh(output.records, force=True)

        except BaseException:
            # Ctrl-C (or any error): nothing more is started, the running children are ended,
            # and nothing half-written is left (every file is replaced atomically).
            stop_new_children()
            pool.shutdown(wait=False, cancel_futures=True)
            kill_all()
            pool.shutdown(wait=True)
            raise
        pool.shutdown(wait=True)
        if bar is not None:
            bar.close()
        output.sweep(protect={tmp_root})
        changed = sorted(set(class_files.items()) ^ set(folder_hashes(submissions, only).items()))
        if changed:
            print(f"warning: the class folder {file_name(str(submissions))} changed while it was graded: "
                  + ", ".join(sorted({file_name(str(p)) for p, _ in changed})[:10]), file=sys.stderr)
        return Gradebook(output.records, kept=len(entries) - len(todo))
    finally:
        setup.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(tmp_root, ignore_errors=True)
        (state / f"tmp-root-{os.getpid()}.txt").unlink(missing_ok=True)


class Gradebook(dict):
    """The records of a class grading (student -> :class:`Record`), and how many of them ``--resume`` kept
    from the earlier run (their submission unchanged) instead of grading them again."""

    def __init__(self, records: dict[str, Record], kept: int = 0) -> None:
        super().__init__(records)
        self.kept = kept


def nothing_to_grade(submissions: Path) -> GradeError:
    """The error of a class folder with no entry to grade (one machine's and Slurm's)."""
    return GradeError(f"{submissions}: nothing to grade (no .py file, notebook, package or student folder in it); "
                      "give the folder that holds one file or folder per student")


def _prepare(ctx: Context, setup: ThreadPoolExecutor) -> None:
    """What every submission's grading needs, made once. A child needs the sandbox and the
    diagnosis table, chosen and written here; deciding a grade needs the skeleton (a trusted
    child collecting the suite, ~4 s) and the re-checks' expected outputs, made in ``setup``'s
    thread while the first children already run (``ctx.skeleton`` waits for them)."""
    ctx.setup = setup.submit(_setup, ctx)
    try:
        chosen = setup.submit(sandbox.choose, ctx.settings.sandbox)  # a probe child, ~1 s
        if ctx.settings.diagnose:
            ctx.diagnosis_table = diagnosis_catalogue.write_table(ctx.tmp_root / "diagnosis.pt",
                                                                  ctx.settings.profile_object())
        ctx.sandbox = chosen.result()
    except BaseException:
        kill_all()  # the skeleton's child, if this process gave up first (no sandbox works here)
        raise


def _setup(ctx: Context) -> Setup:
    skeleton = collect_skeleton(ctx)
    if not ctx.settings.rechecks:
        return Setup(skeleton)
    return Setup(skeleton, recheck.expected_outputs(ctx.seed), recheck.expected_outputs(0, mode=recheck.PUBLIC))


def folder_hashes(folder: Path, only: Path | None = None) -> dict[str, str]:
    """Every entry of the class folder (``only``: that one) -> a fingerprint of its tree (names, sizes, times, link
    targets: no file is read, and no depth or count stops it, :mod:`transformer_spec.grader.tree`): what shows the folder
    changed meanwhile."""
    out = {}
    for p in [only] if only is not None else sorted(folder.iterdir()):
        out[p.name] = "link:" + os.readlink(p) if p.is_symlink() else tree.fingerprint(tree.scan(p))
    return out


def _saved(fut, output: Output, out: Path, comps: list[str], bar) -> None:
    """Save one student's grade; a failure to save it (a bug of the tool, a full disk) is that
    student's ``grader-error`` row, never the end of the batch."""
    record, run, cov = fut.result()
    try:
        output.save(record, run, cov)
    except Exception as exc:  # noqa: BLE001 - one student must not stop the class
        record = Record(record.student, "grader-error", 0.0, record.possible, {}, f"the grade could not be saved "
                        f"({type(exc).__name__}: {exc})", record.submission, record.submission_sha256,
                        not_run(record.tests, "the grade could not be saved"), sandbox=record.sandbox)
        output.save(record, None, None)
    finally:
        if cov is not None:
            shutil.rmtree(cov.parent, ignore_errors=True)
    output.write(out / "gradebook.csv", output.gradebook(comps))
    if bar is not None:
        bar.set_postfix_str(f"{record.student}: {record.status} {format_points(record.total)}", refresh=False)
        bar.update(1)


def _remove_old_tmp_roots(state: Path) -> None:
    """Sandboxes of a run that was killed (their path was noted in OUT/.grade)."""
    for note in state.glob("tmp-root-*.txt"):
        root = Path(note.read_text().strip())
        if root.name.startswith("transformer-spec-grade-") and root.parent == Path(tempfile.gettempdir()):
            shutil.rmtree(root, ignore_errors=True)
        note.unlink(missing_ok=True)


def grade_safely(entry: Entry, ctx: Context):
    """``grade_entry``; an error of the grader itself (a bug of the tool, a fault of the host or of
    the interpreter, such as the parser's spurious ``SystemError`` of ``transformer_spec/grader/absent.py``) is
    graded once more, from the start, since it is never the student's doing; only an error that
    happens twice is the student's ``grader-error`` row, and it never stops the batch."""
    try:
        return grade_entry(entry, ctx)
    except Exception:  # noqa: BLE001 - graded once more, below
        pass
    try:
        return grade_entry(entry, ctx)
    except Exception as exc:  # noqa: BLE001 - a bug of the tool must not stop the batch
        rec = empty_record(entry, ctx, "grader-error", f"{type(exc).__name__}: {exc} (graded twice)", "none")
        return rec, None, None


def _progress(total: int, done: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=done, unit="submission", desc="grading", dynamic_ncols=True)


def merge(outs: list[Path], dest: Path, keep: Path | None = None) -> dict[str, Record]:
    """Combine the outputs of shards (same settings) into ``dest``, new or empty (but for ``keep``, a path under
    it: the Slurm job's state, whose shards these are)."""
    configs, records = [], {}
    sources: dict[str, Path] = {}
    for o in outs:
        cfg = o / STATE_DIR / "config.json"
        if not cfg.is_file():
            raise GradeError(f"{o} is not an output of tools.grade (no {cfg})")
        configs.append(json.loads(cfg.read_text()))
        part = Output(o)
        part.load_records()
        if part.rejected:
            raise GradeError(f"{o}: the record(s) of {', '.join(part.rejected[:10])} do not verify (altered, or not "
                             "written by tools.grade); grade those students again with --resume")
        for s, r in part.records.items():
            if s in records:
                raise GradeError(f"student {s!r} is in both {sources[s]} and {o}: merge the outputs of distinct shards")
            records[s], sources[s] = r, o
    prints = {json.dumps(c["fingerprint"], sort_keys=True) for c in configs}
    if len(prints) != 1:
        raise GradeError("the outputs were graded with different settings (tests, rubric, limits or suite)")
    dest = dest.resolve()
    kept = {dest / keep, *(dest / keep).parents} if keep is not None else set()
    if dest.exists() and any(p not in kept for p in dest.rglob("*") if not (keep and dest / keep in p.parents)):
        raise GradeError(f"{dest} is not empty")
    output = Output(dest)
    for s, src in sources.items():
        sd = src / "students" / s
        for p in sorted(sd.rglob("*")):
            rel = p.relative_to(sd)
            if p.is_file() and not p.is_symlink() and (rel.parts[0] == "coverage" or rel == Path("log.txt")):
                output.write(dest / "students" / s / rel, p.read_bytes())
        output.write_derived(records[s])
        output.write(output.student_dir(s) / RECORD, output.signed(records[s]))
    output.records = records
    output.write(dest / STATE_DIR / "config.json",
                 json.dumps({"fingerprint": configs[0]["fingerprint"], "merged": [str(o) for o in outs]},
                            indent=1, sort_keys=True) + "\n")
    comps = sorted({c for r in records.values() for t in r.tests for c in t["tags"]}, key=registry.names().index)
    output.write(dest / "gradebook.csv", output.gradebook(comps))
    report.Refresher(dest, output.write)(records, force=True)
    return records
