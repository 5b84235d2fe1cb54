"""The component registry: every graded part of the contract, declared once.

A :class:`Component` holds everything the machinery needs about one part of the contract: its
name and short label, its default points, the components whose code it calls (from which
:func:`affected_by` derives which components a mistake also breaks), the contract names it
grades, its known mistakes (:class:`Pitfall`), its diagnosis behaviour probes and its hidden
re-checks. Each built-in component is declared in its own module of
:mod:`transformer_spec.components` (found there by :func:`components`, in ``order``); the rubric's
default points, the kill matrix's columns, the diagnosis and the class grader's re-checks all
read this registry, so adding a component means adding one such module (``docs/architecture.md``
has the whole checklist).

A missing piece is an error that names the component (:func:`missing_pieces`, run by
``tests/test_registry.py``), unless the declaration says why it has none (``why_no_*``).
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

#: a source patch of ``reference/``: (file, old text, new text), see :mod:`transformer_spec.catalogue.patching`
Patch = tuple[str, str, str]


@dataclass(frozen=True)
class Name:
    """One name of the contract: what a submission defines, and the contract row describing it."""

    name: str
    component: str
    kind: str  # "function", "module" or "method"
    row: str  # the contract row, in short (quoted in "not submitted" failures)
    tracks: tuple[str, ...] = ()  # narrower than its component's tracks (padding_mask: classic only)


@dataclass(frozen=True)
class Pitfall:
    """One known mistake: patches of the reference, the component whose code it breaks, and a
    one-line explanation addressed to a student; ``source``: where it was made in real code (a
    repository's issue or commit), for the mistakes mined from public implementations."""

    name: str
    component: str
    explanation: str
    patches: tuple[Patch, ...]
    source: str = ""


@dataclass(frozen=True)
class Recheck:
    """A hidden re-check (run by the class grader outside the grading child): some of the
    contract's outputs on inputs from a secret seed, mirroring one parameter case of a golden
    test (its *anchor*). ``run(module, seed) -> {name: numpy array}``."""

    name: str
    component: str
    anchors: tuple[str, ...]  # node ids: a claimed pass of one of them counts unless this re-check refutes it
    run: Callable
    # The seed at which ``run`` computes exactly its anchor's inputs (the *public replay*): a claimed
    # anchor whose replay returns other values than the reference's is proof of a false report. None:
    # no replay (the inputs are not the anchor's own, e.g. stored snapshot weights).
    public: int | None = None
    # How the secret twin is judged when not by equality to the reference's outputs:
    # ``law(answer, reference) -> None | what is wrong``, on the submission's own numbers (generate:
    # its tokens are the argmax of its own logits), so a bug elsewhere costs its own component only.
    law: Callable | None = None


@dataclass(frozen=True)
class Component:
    """One graded part of the contract (see the module docstring)."""

    name: str
    label: str  # a short column label (the kill matrix)
    points: float  # default points (transformer_spec/rubric.toml may override them)
    order: int  # position in reports: components are listed by it
    depends_on: tuple[str, ...] = ()  # components whose code this one calls
    names: tuple[Name, ...] = ()
    pitfalls: tuple[Pitfall, ...] = ()
    behaviour: Callable | None = None  # behaviour(impl, features): the diagnosis probes
    rechecks: tuple[Recheck, ...] = ()
    #: the tests of what it computes (rubric test ids: a file, a test function, one case): its output against
    #: numbers the submission does not produce (an oracle, a formula, a snapshot, a worked example, a composition
    #: through its own submodules). They share most of its points (rubric.VALUES_SHARE): a law that a constant
    #: output satisfies (causality, an invariance, a shape) is necessary, not sufficient (issue 45)
    values: tuple[str, ...] = ()
    why_no_names: str = ""
    why_no_values: str = ""
    why_no_rechecks: str = ""
    why_no_pitfalls: str = ""
    summary: str = field(default="", compare=False)
    tracks: tuple[str, ...] = ("classic",)  # the tracks that grade it (transformer_spec/contract/tracks.py)
    #: graded only where the rubric gives it points: a rubric's defaults leave it out, and so are its
    #: tests (the modern track's training utilities, docs/contract.md)
    optional: bool = False


_BUILT_IN: dict[str, Component] = {}
_EXTRA: dict[str, Component] = {}
_ORDERED: list[tuple[Component, ...]] = []  # components() as last computed (cleared when _EXTRA changes)
#: upstream() and affected_by() of the components as last computed, cleared with _ORDERED: the diagnosis
#: asks them thousands of times for every class it grades (each answer walks the whole composition)
_DERIVED: dict[tuple[str, str], tuple[str, ...]] = {}


#: The package of the built-in components. The components are the registry's plug-ins: each module of it
#: imports this registry and declares one :class:`Component`; the registry, at the bottom of the layers,
#: finds them at run time by this name (as pytest finds its plug-ins by entry point) and never imports
#: what it registers (``lint-imports``: docs/architecture.md).
COMPONENTS_PACKAGE = __name__.rsplit(".", 2)[0] + ".components"


def _discover() -> None:
    """Import every module of :data:`COMPONENTS_PACKAGE` once; each registers one component."""
    if _BUILT_IN:
        return
    package = importlib.import_module(COMPONENTS_PACKAGE)

    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        component = getattr(module, "COMPONENT", None)
        if not isinstance(component, Component):
            raise TypeError(f"transformer_spec/components/{info.name}.py must define COMPONENT = Component(...)")
        if component.name in _BUILT_IN:
            raise ValueError(f"component {component.name!r} is declared twice")
        _BUILT_IN[component.name] = component


def components() -> tuple[Component, ...]:
    """Every component, in report order (computed once; again after :func:`registered`)."""
    if not _ORDERED:
        _discover()
        _ORDERED.append(tuple(sorted({**_BUILT_IN, **_EXTRA}.values(), key=lambda c: (c.order, c.name))))
    return _ORDERED[0]


def names() -> tuple[str, ...]:
    """The component names, in report order."""
    return tuple(c.name for c in components())


def get(name: str) -> Component:
    """The component called ``name``; ``KeyError`` naming the known ones otherwise."""
    for c in components():
        if c.name == name:
            return c
    raise KeyError(f"unknown component {name!r}; the components are {', '.join(names())}")


def upstream(name: str) -> tuple[str, ...]:
    """The components ``name`` calls, directly or through others (the contract's composition), in
    report order: where a mistake that shows in ``name`` may come from."""
    if ("upstream", name) not in _DERIVED:
        _DERIVED["upstream", name] = _upstream(name)
    return _DERIVED["upstream", name]


def _upstream(name: str) -> tuple[str, ...]:
    table = {c.name: c.depends_on for c in components()}
    found, todo = set(), list(table.get(name, ()))
    while todo:
        d = todo.pop()
        if d not in found:
            found.add(d)
            todo.extend(table.get(d, ()))
    return tuple(c for c in names() if c in found)


def affected_by(name: str) -> tuple[str, ...]:
    """The components a mistake in ``name`` can change: itself and every component that
    depends on it, directly or through others (the contract's composition), in report order."""
    return tuple(c for c in names() if c == name or name in upstream(c))


#: Every catalogue copy (pitfalls and allowed variations) generates through the plain loop that
#: recomputes the window each step, as a student writes ``generate``: the reference's KV cache
#: (outside the contract) steps through its own fused arithmetic, which would bypass the patched
#: code, so a copy generating with it would not behave like the student code it stands for.
PLAIN_GENERATE: Patch = ("minigpt.py", "generator=None,\n                 use_cache=True):",
                         "generator=None,\n                 use_cache=False):")


#: The same for the modern track's MiniLlama (its cache keeps rotated keys and values).
PLAIN_GENERATE_LLAMA: Patch = ("minillama.py", "generator=None,\n                 use_cache=True):",
                               "generator=None,\n                 use_cache=False):")
#: Its undoing, after it: a copy whose MiniLlama generates with the reference's KV cache (a cache mistake,
#: or the variation that keeps the cache).
CACHED_GENERATE_LLAMA: Patch = (PLAIN_GENERATE_LLAMA[0], PLAIN_GENERATE_LLAMA[2], PLAIN_GENERATE_LLAMA[1])


def with_plain_generate(patches: tuple[Patch, ...]) -> tuple[Patch, ...]:
    """``patches`` preceded by :data:`PLAIN_GENERATE` and :data:`PLAIN_GENERATE_LLAMA` (once,
    wherever the catalogue lists them)."""
    plain = (PLAIN_GENERATE, PLAIN_GENERATE_LLAMA)
    return plain + tuple(p for p in patches if p not in plain)


def pitfall(name: str, component: str, explanation: str, *patches: Patch, source: str = "") -> Pitfall:
    """A :class:`Pitfall` (the patches as separate arguments, as the catalogue writes them), its
    copy generating through the plain loop (:data:`PLAIN_GENERATE`)."""
    return Pitfall(name, component, explanation, with_plain_generate(patches), source)


def pitfalls() -> tuple[Pitfall, ...]:
    """Every component's pitfalls, in report order."""
    return tuple(p for c in components() for p in c.pitfalls)


def rechecks() -> tuple[Recheck, ...]:
    """Every component's hidden re-checks, in report order."""
    return tuple(r for c in components() for r in c.rechecks)


def missing_pieces(component: Component, known_tracks: tuple[str, ...] = ()) -> list[str]:
    """What ``component`` lacks (empty when complete), each said in one line naming it; a track not in
    ``known_tracks`` is one (:func:`transformer_spec.contract.tracks.missing_pieces` passes the tracks)."""
    known = {c.name for c in components()} | {component.name}
    problems = []
    who = f"component {component.name!r}"
    if not component.label or len(component.label) > 5:
        problems.append(f"{who}: needs a short label of 1-5 characters (the kill matrix's column)")
    if component.points < 0:
        problems.append(f"{who}: default points must be >= 0")
    problems += [f"{who}: depends on unknown component {d!r}" for d in component.depends_on if d not in known]
    problems += [f"{who}: unknown track {t!r}; the tracks are {', '.join(known_tracks)}"
                 for t in component.tracks if known_tracks and t not in known_tracks]
    if not component.tracks:
        problems.append(f"{who}: belongs to no track (tracks=...)")
    if component.behaviour is None:
        problems.append(f"{who}: has no diagnosis behaviour probes (behaviour=...)")
    for piece, why in (("names", component.why_no_names), ("pitfalls", component.why_no_pitfalls),
                       ("rechecks", component.why_no_rechecks), ("values", component.why_no_values)):
        if not getattr(component, piece) and not why.strip():
            problems.append(f"{who}: has no {piece}, and no why_no_{piece} saying why")
    for group in ("names", "pitfalls", "rechecks"):
        for piece in getattr(component, group):
            if piece.component != component.name:
                problems.append(f"{who}: its {group[:-1]} {piece.name!r} says component {piece.component!r}")
    return problems


def _forget() -> None:
    """Forget what was computed from the components (one was registered or removed)."""
    _ORDERED.clear()
    _DERIVED.clear()


@contextlib.contextmanager
def registered(component: Component) -> Iterator[Component]:
    """Register ``component`` in memory for the duration of the ``with`` block (tests)."""
    _discover()
    if component.name in _BUILT_IN or component.name in _EXTRA:
        raise ValueError(f"component {component.name!r} is already registered")
    _EXTRA[component.name] = component
    _forget()
    try:
        yield component
    finally:
        _EXTRA.pop(component.name, None)
        _forget()
