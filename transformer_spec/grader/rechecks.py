"""The hidden re-checks of one submission: which claimed passes they confirm, which they find to
fail on other inputs, and which they prove false.

Each test the grading child claims passed that is the *anchor* of a re-check
(:class:`transformer_spec.contract.registry.Recheck`) is re-checked in another child (``python -m
transformer_spec.grader.recheck``, in the student's sandbox) on inputs from the batch's secret seed, its
*secret twin*; the reference's outputs were computed by the parent. An anchor whose re-check has a
``public`` seed is also *replayed*: the same re-check on the test's own inputs. Test by test:

* the twin agrees (and the replay, if any): the claim is **confirmed**;
* the twin disagrees, raises or does not answer: a **hidden test that failed**, costing that test's
  points only, never an accusation (``hidden``);
* the replay returns other values than the reference's, or finds a name the test used missing:
  the test cannot have passed on the code that was submitted, so the report is false: **proof**
  of tampering (``refuted``); the replay uses a forbidden API the test's run did not report:
  proof of a forbidden use (``forbidden``, status ``forbidden-api``, as if the test had seen it).
  A replay that raises otherwise, or does not answer, proves nothing.

A re-check child that dies is started again on what it had not answered; a re-check during which
it dies twice is not answered (a hidden failure of its anchor). So an ``os._exit`` or a crash in a
method costs the tests that call it, as in pytest.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from transformer_spec.contract import registry
from transformer_spec.grader.children import run_child
from transformer_spec.grader.sandbox import Jail
from transformer_spec.grader.suite import Context
from transformer_spec.grader import recheck
from transformer_spec.grader.recheck import PUBLIC, SECRET

MAX_RUNS = 6  # re-check children started for one submission at most (each death skips one re-check)


@dataclass(frozen=True)
class Verdicts:
    """The re-checks' verdicts on a submission's claimed passes (node ids)."""

    confirmed: frozenset[str] = frozenset()  # the twin (and the replay) agree
    hidden: dict[str, str] = field(default_factory=dict)  # node id -> why its secret twin fails (neutral)
    refuted: dict[str, str] = field(default_factory=dict)  # node id -> why its public replay proves it false
    forbidden: dict[str, str] = field(default_factory=dict)  # node id -> its replay used a forbidden API
    twinned: frozenset[str] = frozenset()  # the claimed passes that were re-checked at all
    forged: str = ""  # the re-check child's stream was forged: every claimed pass is unconfirmed
    #: the names that are stubs as the submission is loaded (asked with ``stubs=True``; None: no answer)
    stub_names: frozenset[str] | None = None

    @property
    def proof(self) -> str:
        """Why the report is known to be false ("" when it is not)."""
        if self.forged:
            return f"the hidden re-check's process sent {self.forged}"
        return next(iter(self.refuted.values()), "") or next(iter(self.forbidden.values()), "")


def wanted_rechecks(ctx: Context, passed: dict[str, str]) -> list[registry.Recheck]:
    """The re-checks of the claimed passes: those with a claimed anchor."""
    return [r for r in registry.rechecks() if r.name in ctx.expected and any(a in passed for a in r.anchors)]


def run_rechecks(ctx: Context, target: Path, sandbox: Path, passed: dict[str, str], jail: Jail,
                 stubs: bool = False) -> Verdicts:
    """``passed``: claimed passes, node id -> component. A re-check child that ends before answering
    is started again on the rest (a host's kill costs nothing; a submission's crash costs the
    re-check it happened in, once it happened there twice). ``stubs``: also ask the child which names
    are stubs as loaded (:func:`transformer_spec.pytest_plugin.stubs.loaded_stub_names`), the child started for that
    alone if no re-check is wanted; what it says can only prove its own code a stub."""
    if not ctx.settings.rechecks:
        return Verdicts()
    wanted = wanted_rechecks(ctx, passed)
    if not wanted and not stubs:
        return Verdicts()
    todo = [(r.name, SECRET) for r in wanted] + [(r.name, PUBLIC) for r in wanted if r.public is not None]
    got: dict[tuple[str, str], dict] = {}
    deaths: dict[tuple[str, str], int] = {}
    deadline = time.monotonic() + 2 * ctx.settings.limits.recheck_seconds
    forged = None
    stub_names: frozenset[str] | None = None
    for run in range(MAX_RUNS):
        rest = [x for x in todo if x not in got]
        wall = deadline - time.monotonic()
        if not (rest or stubs and run == 0) or wall <= 1:
            break
        answers, forged, unfinished, said = _run_child(ctx, target, sandbox, rest, jail, wall, stubs and run == 0)
        stub_names = said if said is not None else stub_names
        got.update(answers)
        if forged or not unfinished:
            break
        left = [x for x in rest if x not in got]
        if left:  # the child died (or stopped) during the first re-check it did not answer
            deaths[left[0]] = deaths.get(left[0], 0) + 1
            if deaths[left[0]] >= 2:
                got[left[0]] = {"error": f"the submission's process {unfinished} during this re-check (twice)"}
    found = verdicts(wanted, got, forged, passed, ctx.expected, ctx.expected_public)
    return found if forged or stub_names is None else dataclasses.replace(found, stub_names=stub_names)


def _run_child(ctx: Context, target: Path, sandbox: Path, runs: list[tuple[str, str]], jail: Jail,
               wall: float, stubs: bool = False
               ) -> tuple[dict[tuple[str, str], dict], str | None, str, frozenset[str] | None]:
    """The re-check child's answers ((name, mode) -> message), its forgery if any, why it did not finish,
    and the stub names it found (``stubs``: asked; None: not asked, or no answer)."""
    lim = ctx.settings.limits
    work = sandbox / "recheck-work"
    (work / "tmp").mkdir(parents=True, exist_ok=True)
    wall = min(wall, lim.recheck_seconds)
    run = run_child([sys.executable, "-I", "-m", "transformer_spec.grader.recheck", "--impl", str(target)],
                    cwd=work, env=ctx.env(work), limits=lim, jail=jail.seeing(ctx.view(sandbox, work, sandbox / "sub")),
                    extra={"seed": ctx.seed, "rechecks": [n for n, m in runs if m == SECRET],
                           "public": [n for n, m in runs if m == PUBLIC], "threads": lim.threads,
                           "forbidden": list(ctx.rubric.forbidden), "seconds_each": min(30.0, wall),
                           "profile": ctx.profile_arg(sandbox), "stubs": stubs},
                    wall=wall)
    got: dict[tuple[str, str], dict] = {}
    done = False
    said = None
    for m in run.messages:
        if m.get("kind") == "recheck" and isinstance(m.get("name"), str) and m.get("mode") in (SECRET, PUBLIC):
            got[(m["name"], m["mode"])] = m
        if stubs and m.get("kind") == "stubs" and isinstance(m.get("names"), list):
            said = frozenset(n for n in m["names"] if isinstance(n, str))
        done = done or m.get("kind") in ("recheck-done", "recheck-import-error")
    unfinished = "" if done else (f"was stopped after {wall:g} s" if run.timed_out
                                  else f"ended with exit code {run.returncode}")
    return got, run.forged, unfinished, None if run.forged else said


def answer_problem(check: registry.Recheck, message: dict | None, expected: dict, mode: str) -> tuple[str | None, str]:
    """What is wrong with the child's answer to ``check`` in ``mode`` (None: right), and what that
    proves of a public replay: "value" (other values, or a name the test uses missing),
    "forbidden" (a forbidden API used), "" (an error or silence: nothing)."""
    if message is None:
        return "the submission's process ended before answering", ""
    if "error" in message:
        proves = "forbidden" if message.get("forbidden") is True else "value" if message.get("missing") is True else ""
        return str(message["error"])[:300], proves
    try:
        return recheck.judge(check, recheck.decode_arrays(message.get("arrays")), expected[check.name], mode), "value"
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        return f"unreadable answer ({exc})", ""


def verdicts(wanted: list[registry.Recheck], got: dict[tuple[str, str], dict], forged: str | None,
             passed: dict[str, str], expected: dict, expected_public: dict) -> Verdicts:
    """The verdicts, from the re-check child's answers ``got`` ((name, mode) -> message)."""
    hidden: dict[str, str] = {}
    refuted: dict[str, str] = {}
    forbidden: dict[str, str] = {}
    twinned: set[str] = set()
    for r in wanted:
        anchors = [a for a in r.anchors if a in passed]
        twinned.update(anchors)
        if forged:
            continue
        secret, _ = answer_problem(r, got.get((r.name, SECRET)), expected, SECRET)
        public, proves = (None, "") if r.public is None or r.name not in expected_public else \
            answer_problem(r, got.get((r.name, PUBLIC)), expected_public, PUBLIC)
        for a in anchors:
            if public is not None and proves == "value":
                refuted.setdefault(a, f"re-check {r.name} on the test's own inputs: {public}")
            elif public is not None and proves == "forbidden":
                forbidden.setdefault(a, f"re-check {r.name} on the test's own inputs: {public}")
            elif secret is not None or public is not None:
                hidden.setdefault(a, f"re-check {r.name}: {secret or public}")
    if forged:
        return Verdicts(twinned=frozenset(twinned), forged=forged)
    confirmed = frozenset(a for a in twinned if a not in hidden and a not in refuted and a not in forbidden)
    return Verdicts(confirmed, hidden, refuted, forbidden, frozenset(twinned))
