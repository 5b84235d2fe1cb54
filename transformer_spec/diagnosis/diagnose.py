"""Named diagnoses: recognise a known mistake (a pitfall of the catalogue) by its behaviour.

When a component fails, the submission is run through that component's behaviour probes
(:mod:`transformer_spec.probes.behaviour`); so are the reference and every pitfall that can show there
(:mod:`transformer_spec.diagnosis.catalogue`, cached). For a component, a pitfall's *evidence* is
the set of features where it differs from the reference.

* **match**: the submission agrees with the pitfall on every feature of the component;
* **partial match**: it agrees on the pitfall's evidence, but differs elsewhere too (perhaps
  more than one mistake); named only when the partial matches together explain every feature
  where the submission differs from the reference (otherwise the evidence may be a coincidence);
* otherwise nothing is named: "no known mistake matches".

A pitfall whose evidence is empty for a component (its probes cannot see it) is never named.

    python -m transformer_spec.diagnosis.accuracy   # recall and precision (also: tools.mutants --diagnose-accuracy)
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from transformer_spec.contract import registry
from transformer_spec.contract.registry import Pitfall
from transformer_spec.diagnosis import catalogue as catalogue
from transformer_spec.diagnosis import profiles as through
from transformer_spec.diagnosis import reach
from transformer_spec.guard import alarm
from transformer_spec.probes import behaviour
from transformer_spec.results.outcomes import DIAGNOSED, Outcome

NO_DIAGNOSE_ENV = "TRANSFORMER_SPEC_NO_DIAGNOSE"
#: The longest a diagnosis may take at the end of a graded run (it runs submission code again).
DIAGNOSIS_SECONDS = 60.0


@dataclass
class Diagnosis:
    component: str
    matches: list[Pitfall]      # agree on every feature of the component
    partial: list[Pitfall]      # agree on the pitfall's evidence only
    differs_from_reference: bool
    #: the components it calls whose own probes differ from a correct implementation: its failures
    #: may come from there, so it names only what their own diagnoses name
    caused_by: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.matches]

    def message(self, profile=None) -> str:
        """What the student reads; under a course ``profile`` in its words: each component with the course's
        functions (``gqa (run_multihead_self_attention, ...)``), each pitfall as its catalogue says it."""
        def part(c: str) -> str:
            return through.profile_of(profile).label(c)

        def line(p: Pitfall) -> str:
            where = "" if p.component == self.component else f" (a mistake in the '{part(p.component)}' part)"
            return f"  - {through.explanation(p, profile)}{where} [pitfall `{p.name}`]"

        if self.matches:
            head = (f"Diagnosis for '{part(self.component)}': on fixed probe inputs your code behaves exactly like "
                    + ("this known mistake:" if len(self.matches) == 1 else
                       "these known mistakes (they behave identically on the probes; one of them is likely):"))
            return "\n".join([head, *map(line, self.matches[:4])])
        if self.partial:
            head = (f"Diagnosis for '{part(self.component)}' (partial): where this known mistake shows, your code "
                    f"behaves like it, but it also differs elsewhere (maybe more than one problem):")
            return "\n".join([head, *map(line, self.partial[:3])])
        if self.caused_by:
            parts = " and ".join(f"'{part(c)}'" for c in self.caused_by)
            return (f"Diagnosis for '{part(self.component)}': it calls {parts}, whose own behaviour already differs from a "
                    f"correct implementation, so these failures are likely caused by a mistake in {parts}: fix "
                    f"that first (see its diagnosis and failing tests), then run the tests again.")
        if not self.differs_from_reference:
            return (f"Diagnosis for '{part(self.component)}': the diagnosis probes found no difference from a correct "
                    f"implementation, so no known mistake is named; read the failing tests' messages.")
        return (f"Diagnosis for '{part(self.component)}': no known mistake of the catalogue "
                f"(transformer_spec/catalogue/pitfalls.py) matches your code's behaviour; read the failing tests' messages.")


#: feature values that say a name is missing or still a stub: no behaviour, so no difference upstream
_ABSENT = ("not submitted", "raises NotImplementedError")


def _own_diagnosis(comp: str, sub: dict, table, profile=None) -> Diagnosis:
    """What the probes of ``comp`` alone say: the catalogue's full and partial matches."""
    tol = through.tolerance(profile)
    ref = table["reference"][comp]
    keys = sorted(set(sub) | set(ref))
    differs = any(not behaviour.same(sub.get(k), ref.get(k), tol) for k in keys)
    matches, partial = [], []
    explained: set[str] = set()
    # Two crashes alike count only where the submission answers somewhere: crashing on every probe, only the
    # very same crashes are evidence (issue 44: a decoder whose cross-attention crashed on the memory mask was
    # named after another mistake that crashes there)
    alike = _alike if not _answers_nothing(sub) else (lambda a, b, t: behaviour.same(a, b, t))
    free = catalogue.free_features(table, comp)
    if differs:
        for p in catalogue.candidates(comp, profile):
            ev = catalogue.evidence(table, p.name, comp, tol)
            if not ev:
                continue
            theirs = table[p.name][comp]
            # where the code took the other side of a free choice, the mistake's numbers there are not its own
            needed = [k for k in ev if k not in free] or ev
            if all(alike(sub.get(k), theirs.get(k), tol) for k in sorted(set(sub) | set(theirs))):
                matches.append(p)
            elif all(alike(sub.get(k), theirs.get(k), tol) for k in needed):
                partial.append((len(needed), p))
                explained |= set(needed)
    # Partial matches are named only when together they explain every difference from the
    # reference: a mistake that agrees on its own evidence (perhaps one yes/no behaviour) while
    # other behaviours are unexplained is a guess, and a wrong name misleads more than none.
    # A name the submission does not define is said by its own tests, not explained by a mistake here; a feature
    # that an allowed variation changes (another order of AdamW's decay, say) is a free choice, no evidence.
    different = {k for k in keys if not behaviour.same(sub.get(k), ref.get(k), tol) and sub.get(k) not in _ABSENT
                 and k not in free}
    if not different <= explained:
        partial = []
    if differs and not matches and not partial:
        partial = _by_behaviour(comp, sub, table, different, profile)
    partial_sorted = [p for _, p in sorted(partial, key=lambda t: -t[0])]
    # own-component pitfalls first: a mistake in this very part is the likelier explanation
    matches.sort(key=lambda p: p.component != comp)
    return Diagnosis(comp, matches, partial_sorted, differs)


def _crash(value) -> bool:
    return isinstance(value, str) and value.startswith("raises ") and value not in _ABSENT


#: what code raises on purpose for an argument it refuses (the contract's checks): never "just a crash"
_DELIBERATE = ("raises ValueError", "raises TypeError")


def _alike(mine, theirs, tol: behaviour.Tolerance) -> bool:
    """A submission's feature agrees with a mistake's: the same value, or both crash on that probe and the
    submission's crash is no deliberate refusal (the same mistake written another way raises another exception:
    an einsum's RuntimeError where the catalogue's copy of the reference raises its own ValueError, for positions
    it cannot broadcast; but a ValueError the submission raises on purpose is compared as it is)."""
    return behaviour.same(mine, theirs, tol) or _crash(mine) and _crash(theirs) and mine not in _DELIBERATE


def _answers_nothing(sub: dict) -> bool:
    """Every probe of the component raised (an error, a missing name, a stub)."""
    values = [v for v in sub.values() if v is not None]
    return bool(values) and all(isinstance(v, str) and (v.startswith("raises ") or v in _ABSENT) for v in values)


def _by_behaviour(comp: str, sub: dict, table, different: set[str], profile=None) -> list[tuple[int, Pitfall]]:
    """The partial matches on the behavioural features alone (``behaviour.BEHAVIOURAL``): pitfalls
    whose behaviours the submission shares where they differ from the reference, kept only when
    together they explain every behaviour in which the submission differs. For code not derived from
    the reference, whose raw numbers differ from every copy of it (issue 27)."""
    shown = {k for k in different if k.startswith(behaviour.BEHAVIOURAL)
             and not (isinstance(sub.get(k), str) and sub[k].startswith("raises "))}  # a crash is no behaviour
    if not shown:
        return []
    found, explained = [], set()
    tol = through.tolerance(profile)
    ref, free = table["reference"][comp], catalogue.free_features(table, comp)
    for p in catalogue.candidates(comp, profile):
        theirs = table[p.name][comp]
        # a mistake that would change a feature the submission shares with a correct implementation is not its
        # mistake (reading the first position's logits draws beyond the top k, but changes greedy decoding too)
        if any(behaviour.same(sub.get(k), ref.get(k), tol) for k in catalogue.evidence(table, p.name, comp, tol)
               if k not in free and sub.get(k) not in _ABSENT):
            continue
        # a behaviour is a signature where the mistake answers: that it raises is shared by any crash
        ev = [k for k in catalogue.evidence(table, p.name, comp, tol) if k.startswith(behaviour.BEHAVIOURAL)
              and not (isinstance(theirs.get(k), str) and theirs[k].startswith("raises "))]
        if ev and all(_alike(sub.get(k), theirs.get(k), tol) for k in ev):
            found.append((len(ev), p))
            explained |= set(ev)
    return found if shown <= explained else []


def _shows_a_difference(comp: str, sub: dict, table, tol: behaviour.Tolerance) -> bool:
    """The probes of ``comp`` show a behaviour of its own that differs from the reference (a name
    missing or a stub is no behaviour)."""
    ref, free = table["reference"][comp], catalogue.free_features(table, comp)
    return any(not behaviour.same(sub.get(k), ref.get(k), tol) and sub.get(k) not in _ABSENT and k not in free
               for k in set(sub) | set(ref))


def diagnose(impl, components: Iterable[str], table=None, profile=None) -> dict[str, Diagnosis]:
    """A :class:`Diagnosis` per component for the loaded submission ``impl`` (under the course profile
    ``profile``: as :func:`transformer_spec.diagnosis.profiles.submission` probes it, against the
    catalogue written in the course's API).

    A mistake of another part is named here only when that part's own probes name it; a mistake of
    this part only when nothing it calls (:func:`registry.upstream`) behaves differently from a
    correct implementation where this part reaches it (:mod:`transformer_spec.diagnosis.reach`: on the calls a
    correct one makes into it), else it says its failures are likely caused there. A name read off
    behaviour that an upstream mistake changed would send the student to the wrong place (issue 27)."""
    comps = list(components)
    needed = [c for c in registry.names() if c in comps or any(c in registry.upstream(x) for x in comps)]
    table = table if table is not None else catalogue.catalogue_features(needed, profile)
    tol = through.tolerance(profile)
    mine = behaviour.features(impl, needed, through.lacks(profile))
    own = {c: _own_diagnosis(c, mine[c], table, profile) for c in needed}
    calls = table.get(reach.TABLE_KEY, {})  # a correct component's calls into the parts it calls (reach.py)
    shown = {c: {p.name for p in (d.matches or d.partial)} for c, d in own.items()}
    out = {}
    for comp in comps:
        d = own[comp]
        upstream = tuple(u for u in registry.upstream(comp) if _shows_a_difference(u, mine[u], table, tol)
                         and reach.reached(calls.get(comp, {}).get(u), impl, tol))

        def kept(p: Pitfall) -> bool:
            if p.component != comp:  # a mistake of a part it calls: only if that part's own probes show it
                return p.name in shown.get(p.component, ())
            return not upstream  # its own mistake: only if nothing it calls behaves differently

        out[comp] = Diagnosis(comp, [p for p in d.matches if kept(p)], [p for p in d.partial if kept(p)],
                              d.differs_from_reference, upstream)
    return out


@dataclass(frozen=True)
class Annotations:
    """What a graded run's diagnosis found, by failing component (in report order)."""

    messages: dict[str, str]  # the diagnosis a student reads
    mistakes: dict[str, tuple[str, ...]]  # the pitfalls it names (the matches, else the partial ones)


def annotate(submission, results: Iterable[Outcome], profile=None) -> Annotations:
    """The diagnosis of each failing component of a graded run (the grading plugin shows each
    message once: the notes, results.json's ``output`` and ``extra_data``; the class report
    counts the named pitfalls).

    ``results`` are the run's settled outcomes. Skipped when the submission did not import, when
    ``$TRANSFORMER_SPEC_NO_DIAGNOSE`` is set, or for a component whose failures are all missing
    names, stubs (or tests that use one), forbidden APIs, timeouts or tests that did not run
    (their messages already say what to do). The key ``"(all)"`` holds a note when the
    diagnosis could not run. Under a course ``profile`` it runs where
    :func:`transformer_spec.diagnosis.profiles.diagnosable` (else it names nothing).
    """
    if os.environ.get(NO_DIAGNOSE_ENV) or submission.error is not None or not through.diagnosable(profile):
        return Annotations({}, {})
    failing = {r.component for r in results if r.kind in DIAGNOSED and not r.uses_stub}
    if not failing:
        return Annotations({}, {})
    try:
        probed = through.submission(submission, profile)
        found = alarm.call_within(DIAGNOSIS_SECONDS, lambda: diagnose(
            probed, [c for c in registry.names() if c in failing], profile=profile), "the diagnosis")
    except BaseException as exc:  # noqa: BLE001 - submission code runs here: SystemExit, a hang... never break a grade
        return Annotations({"(all)": f"(the diagnosis could not run: {type(exc).__name__}: {exc})"}, {})
    return Annotations({comp: d.message(profile) for comp, d in found.items()},
                       {comp: tuple(p.name for p in (d.matches or d.partial)) for comp, d in found.items()
                        if d.matches or d.partial})

