"""The hidden re-checks of one submission, and which components' claimed passes they void.

Every component with a pass claimed by the grading child is re-checked in another child
(``python -m transformer_spec.recheck``, in the student's sandbox) on inputs from the batch's
secret seed; the reference's outputs were computed by the parent. A component's claimed passes
count only when its re-checks agree with the reference:

* a re-check that disagrees, fails or does not answer voids the component; when it mirrors a
  test the child claimed passed (its *anchor*), the claim is contradicted: the report lied, and
  the status is ``tampering``;
* re-checks that all find the names they need missing (``not submitted``) void it too, as a
  contradiction: passes claimed without the code behind them are not real;
* re-checks of which some find their names missing and the others agree keep it (a partial
  submission keeps the points of what it has).

So a forged report gains at most the tests of components whose behaviour the code really has.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from transformer_spec import recheck, registry

from .children import run_child
from .sandbox import Jail
from .suite import Context


@dataclass(frozen=True)
class Voided:
    """A component whose claimed passes do not count."""

    why: str
    contradicted: bool  # a re-check disagrees with a test the child claimed passed

    def message(self, comp: str) -> str:
        if self.contradicted:
            return (f"0 points: the grader's hidden re-check of '{comp}' contradicts the passes reported from "
                    f"inside the submission's process ({self.why})")
        return (f"0 points: the grader's hidden re-check of '{comp}' on secret inputs does not agree with a "
                f"correct implementation ({self.why}); a component's passes count only when it does")


def run_rechecks(ctx: Context, target: Path, sandbox: Path, passed: dict[str, str],
                 jail: Jail) -> tuple[dict[str, Voided], str]:
    """``passed``: claimed passes, node id -> component. Returns the voided components, and why the
    re-check process did not finish ("" when it did). A process that did not finish (killed, or
    out of time on a loaded host) is run once more before its silence voids anything."""
    if not ctx.settings.rechecks:
        return {}, ""
    claimed = set(passed.values())
    wanted = [r for r in registry.rechecks() if r.component in claimed and r.name in ctx.expected]
    if not wanted:
        return {}, ""
    for _ in range(2):
        got, forged, unfinished = _run_child(ctx, target, sandbox, wanted, jail)
        if forged or not unfinished:
            break
    return verdicts(wanted, got, forged, passed, ctx.expected), "" if forged else unfinished


def _run_child(ctx: Context, target: Path, sandbox: Path, wanted: list[registry.Recheck],
               jail: Jail) -> tuple[dict[str, dict], str | None, str]:
    """The re-check child's answers (name -> message), its forgery if any, and why it did not finish."""
    lim = ctx.settings.limits
    work = sandbox / "recheck-work"
    (work / "tmp").mkdir(parents=True, exist_ok=True)
    run = run_child([sys.executable, "-I", "-m", "transformer_spec.recheck", "--impl", str(target)],
                    cwd=work, env=ctx.env(work), limits=lim, jail=jail.seeing(ctx.view(sandbox, work, sandbox / "sub")),
                    extra={"seed": ctx.seed, "rechecks": [r.name for r in wanted], "threads": lim.threads,
                           "forbidden": list(ctx.rubric.forbidden), "seconds_each": min(30.0, lim.recheck_seconds)},
                    wall=lim.recheck_seconds)
    got: dict[str, dict] = {}
    done = False
    for m in run.messages:
        if m.get("kind") == "recheck" and isinstance(m.get("name"), str):
            got[m["name"]] = m
        done = done or m.get("kind") in ("recheck-done", "recheck-import-error")
    unfinished = "" if done else (f"stopped after {lim.recheck_seconds:g} s" if run.timed_out
                                  else f"ended with exit code {run.returncode} before answering")
    return got, run.forged, unfinished


def verdicts(wanted: list[registry.Recheck], got: dict[str, dict], forged: str | None, passed: dict[str, str],
             expected: dict) -> dict[str, Voided]:
    """The voided components, from the re-check child's answers ``got`` (name -> message)."""
    by_comp: dict[str, list[tuple[registry.Recheck, str | None, bool]]] = {}
    for r in wanted:
        missing = False
        if forged:
            why = f"the re-check process sent {forged}"
        else:
            m = got.get(r.name)
            if m is None:
                why = "the submission's process ended before answering"
            elif "error" in m:
                why, missing = str(m["error"])[:300], m.get("missing") is True
            else:
                try:
                    why = recheck.compare(recheck.decode_arrays(m.get("arrays")), expected[r.name])
                except (ValueError, KeyError, TypeError) as exc:
                    why = f"unreadable answer ({exc})"
        by_comp.setdefault(r.component, []).append((r, why, missing))
    voided: dict[str, Voided] = {}
    for comp, results in by_comp.items():
        bad = [(r, why) for r, why, missing in results if why and not missing]
        nothing = not bad and all(missing for _, _, missing in results)
        if nothing:
            bad = [(r, why) for r, why, _ in results]  # passes claimed with none of the code behind them
        if bad:
            lied = bad if forged or nothing else [(r, why) for r, why in bad if any(a in passed for a in r.anchors)]
            r, why = (lied or bad)[0]
            voided[comp] = Voided(f"re-check {r.name}: {why}", bool(lied))
    return voided
