"""Stub detection: which contract names are not implemented yet (they raise NotImplementedError).

A test that passes while using a stub earns nothing (``docs/grading.md``): a starter file whose
``forward`` raises ``NotImplementedError`` must not collect points from tests that happen to pass
around it. Two ways find a stub: statically, before any test runs (:func:`static_stubs`: the
code of a name unconditionally raises), and while the tests run (:func:`stubs_raised`: a test
reached a ``NotImplementedError`` raised in the submission's own files).
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from collections.abc import Iterable

from transformer_spec.contract import names as contract
from transformer_spec.pytest_plugin import failures
from transformer_spec.submission import loader


def _always_raises_not_implemented(func) -> bool:
    """Whether ``func``'s body reaches ``raise NotImplementedError`` unconditionally (a stub)."""
    return _source_raises_first(func)


def _source_raises_first(source_of) -> bool:
    """Whether the first ``def`` of ``inspect.getsource(source_of)`` reaches ``raise NotImplementedError``
    before any ``return`` among its own statements."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(source_of)))
    except (OSError, TypeError, SyntaxError, IndentationError, ValueError, RecursionError, MemoryError):
        return False
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return bool(defs) and is_stub_def(defs[0])


def is_stub_def(node: ast.AST) -> bool:
    """A ``def`` that reaches ``raise NotImplementedError`` before any ``return`` among its body's own statements:
    the stub rule, read from source (here and by ``transformer_spec/grader/absent.py``)."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for stmt in node.body:
        if isinstance(stmt, ast.Return):
            return False
        if isinstance(stmt, ast.Raise) and stmt.exc is not None:
            exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
            return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def static_stubs(sub: loader.Submission, paths: list[str]) -> set[str]:
    """Contract names whose own code is a stub: the function, or a method of the class (or of a
    base class the submission wrote), unconditionally raises NotImplementedError. A method that
    is itself a contract name (``MiniGPT.generate``) counts for that name only."""
    known = contract.by_name()

    def own(obj) -> bool:
        filename = getattr(getattr(obj, "__code__", None), "co_filename", None)
        if filename is None:
            module = sys.modules.get(getattr(obj, "__module__", ""), None)
            filename = getattr(module, "__file__", None)
        return bool(filename) and any(str(filename).startswith(p) for p in paths)

    stubs = set()
    for entry in known.values():
        try:
            obj = sub.resolve(entry.name)
        except loader.SubmissionError:
            continue
        if isinstance(obj, type):
            funcs = [
                value for klass in obj.__mro__ if own(klass)
                for attr, value in vars(klass).items()
                if inspect.isfunction(value) and f"{entry.name}.{attr}" not in known
            ]
        else:
            funcs = [obj] if inspect.isfunction(obj) and own(obj) else []
        if any(_always_raises_not_implemented(f) for f in funcs):
            stubs.add(entry.name)
    return stubs


def stubs_raised(exc: BaseException, uses: Iterable[str], paths: list[str]) -> set[str]:
    """The stubs a ``NotImplementedError`` reveals: the contract name whose code raised it, and
    every name the test used through it (``MiniGPT`` when its ``SinusoidalPositionEncoding`` is a
    stub), but not the class of a stubbed method (``MiniGPT`` when only ``MiniGPT.generate`` is)."""
    tb = failures.submission_frame(exc, paths)
    raised_in = None
    if tb is not None:
        code = tb.tb_frame.f_code
        raised_in = failures.contract_name_of(getattr(code, "co_qualname", code.co_name))
    found = {raised_in} if raised_in is not None else set()
    for name in uses:
        if raised_in is None or not (raised_in == name or raised_in.startswith(name + ".")):
            found.add(name)
        elif raised_in == name:
            found.add(name)
    return found


def _own_code_is_a_stub(func, own) -> bool:
    """Whether ``func`` is itself, as loaded, a function of the submission's files whose own code is a stub:
    its ``__code__`` read, never what a ``__wrapped__`` points to (a wrapper may call other code)."""
    code = getattr(func, "__code__", None)
    return inspect.isfunction(func) and "__wrapped__" not in vars(func) and code is not None and own(func) \
        and _source_raises_first(code)


def loaded_stub_names(sub: loader.Submission, paths: list[str], profile=None) -> set[str]:
    """The names through which the grade reaches the submission that are stubs as the submission is
    loaded (issue 45: the source can hide what a module binds, through ``vars()`` or ``exec``; the objects
    the tests call cannot): under a course profile whose functions are known (``Profile.functions``), those
    of its course's module (``sub.course``: CS336's adapter functions) that are stub functions; else the
    contract's names that :func:`static_stubs` finds, read from the code objects themselves. A name the tests
    reach only through a stub earns nothing in the grading child (the stub rule), so every claimed pass of a
    component all of whose names are here is false (``tools.grade``'s proof)."""
    def own(obj) -> bool:
        filename = getattr(getattr(obj, "__code__", None), "co_filename", None)
        return bool(filename) and any(str(filename).startswith(p) for p in paths)

    course = getattr(sub, "course", None)
    if profile is not None and profile.build is not None:
        if course is None:
            return set()
        wanted = {n for names in profile.functions.values() for n in names}
        return {n for n in wanted if _own_code_is_a_stub(inspect.getattr_static(course, n, None), own)}
    known = contract.by_name()
    found = set()
    for entry in known.values():
        if "." in entry.name:
            continue
        try:
            obj = sub.resolve(entry.name)
        except loader.SubmissionError:
            continue
        if isinstance(obj, type):
            funcs = [value for klass in obj.__mro__ if klass is not object
                     for attr, value in vars(klass).items() if f"{entry.name}.{attr}" not in known]
            if any(_own_code_is_a_stub(f, own) for f in funcs):
                found.add(entry.name)
        elif _own_code_is_a_stub(obj, own):
            found.add(entry.name)
    return found
