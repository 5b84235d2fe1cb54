"""Which contract names a submission certainly does not define, read from its files (never run).

A test of a component cannot pass when none of the component's names exists: it would fail as
``not submitted``. So a grading child that claims such a pass sent a false report: proof of
tampering that needs no re-check (the forger that implements nothing and reports passes only for
tests without a hidden twin). The parent decides it from the submission's source alone:

* a name is *possibly defined* when it appears anywhere in a file as something bound: a ``def``,
  a ``class``, an assignment or other store target, an attribute assigned, an import's name or
  alias, a ``global`` (an over-approximation: absence is claimed only where no binding can exist);
* the reading gives up (no name is called absent) when a file may bind names the reading cannot
  see: ``exec``/``eval``/``compile``, ``globals()``/``vars()``/``locals()``, ``setattr``,
  ``__import__``/``importlib``, a module ``__getattr__``, ``__dict__``, ``sys.modules``,
  ``import *``; a file that does not parse; compiled or other code files (``.so``, ``.pyc``, ``.pth``);
  too much source to read.

The class grader reads the files in its grading threads, several at once. On CPython before 3.13,
``ast.parse`` in two threads at once can fail with a spurious ``SystemError: AST constructor
recursion depth mismatch`` (cpython gh-106905: the depth counter is the interpreter's, and a
finalizer run by the garbage collector mid-parse lets another thread in): it cost an honest
student the whole grade as a ``grader-error``. So :func:`parse` holds one lock, and retries once
on the ``SystemError`` a parse in some other thread (a traceback's carets) can still cause.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Iterable
from pathlib import Path

from transformer_spec.contract import names as contract
from transformer_spec.contract import registry
from transformer_spec.pytest_plugin import stubs
from transformer_spec.submission import notebooks

MAX_SOURCE_BYTES = 4 * 2**20
DYNAMIC = frozenset({"exec", "eval", "compile", "globals", "vars", "locals", "setattr", "__import__", "importlib",
                     "__getattr__", "__dict__", "modules", "__builtins__", "builtins", "import_module"})
CODE_SUFFIXES = (".so", ".pyd", ".pyc", ".pth", ".dll", ".dylib")
_PARSE_LOCK = threading.Lock()  # one ast.parse at a time in this process (see the module docstring)


def parse(source: str, filename: str) -> ast.Module | None:
    """``source``'s tree, or None when it cannot be read as Python: a syntax error, null bytes, or
    nesting too deep for the parser (RecursionError, MemoryError). Thread-safe."""
    for attempt in range(2):
        try:
            with _PARSE_LOCK:
                return ast.parse(source, filename)
        except SystemError:  # gh-106905 (see the module docstring): once more, then give up
            if attempt:
                return None
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    return None


def _sources(root: Path) -> list[tuple[str, str]] | None:
    """(file name, source) of every Python file and notebook cell under ``root``; None when there is
    code that cannot be read as source."""
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() or p.is_symlink())
    out, total = [], 0
    for p in files:
        if p.is_symlink() or p.name.endswith(CODE_SUFFIXES):
            return None
        if p.suffix == ".py":
            total += p.stat().st_size
            if total > MAX_SOURCE_BYTES:
                return None
            out.append((str(p), p.read_text(errors="replace")))
        elif p.suffix == ".ipynb":
            total += p.stat().st_size
            if total > MAX_SOURCE_BYTES:
                return None
            out += [(c.filename, c.source) for c in notebooks.read(p).cells]
    return out


def bound_names(root: Path) -> set[str] | None:
    """Every name the files under ``root`` may bind (see the module docstring); None: unknown."""
    sources = _sources(root)
    if sources is None:
        return None
    names: set[str] = set()
    for filename, source in sources:
        tree = parse(source, filename)
        if tree is None:
            return None
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                if node.id in DYNAMIC:
                    return None
                if not isinstance(node.ctx, ast.Load):
                    names.add(node.id)
            elif isinstance(node, ast.Attribute):
                if node.attr in DYNAMIC:
                    return None
                if not isinstance(node.ctx, ast.Load):
                    names.add(node.attr)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node.name in DYNAMIC:
                    return None
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in DYNAMIC:
                    return None
                for alias in node.names:
                    if alias.name == "*" or alias.name.split(".")[0] in DYNAMIC:
                        return None
                    names.add(alias.asname or alias.name.split(".")[0])
                    names.add(alias.name.split(".")[-1])
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                names.update(node.names)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                names.add(node.name)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
                names.add(node.name)
            elif isinstance(node, ast.MatchMapping) and node.rest:
                names.add(node.rest)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in DYNAMIC:
                return None
    return names


def _names_reached(component, profile) -> list[str]:
    """The names through which the grade reaches ``component``'s code: the contract's (only those of its
    own; methods such as ``MiniGPT.generate`` are not counted), or under a course profile the course's
    functions for it (``Profile.functions``: CS336's adapter functions, whatever classes they call).
    Empty: nothing can be claimed absent (a profile that does not say which of its names reach it)."""
    if profile is not None and profile.build is not None:
        return list(profile.functions.get(component.name, ()))
    return [n.name for n in component.names if "." not in n.name]


def absent_components(root: Path, profile=None) -> set[str]:
    """The components none of whose names (:func:`_names_reached`; ``profile``: the course profile
    graded, a :class:`transformer_spec.profiles.Profile`) the submission under ``root`` can define."""
    names = bound_names(root)
    if names is None:
        return set()
    out = set()
    for c in registry.components():
        own = _names_reached(c, profile)
        if own and not any(n in names for n in own):
            out.add(c.name)
    return out


#: what could bind a function's name unseen, for the stub proof (loading a module, as the handout's
#: ``importlib.metadata.version`` does, binds no function of another file)
_REBINDS = frozenset({"exec", "eval", "compile", "globals", "vars", "locals", "setattr", "__getattr__", "__dict__",
                      "modules", "__builtins__", "builtins", "reload"})


def _is_stub_function(node: ast.AST) -> bool:
    """A ``def`` that reaches ``raise NotImplementedError`` before any ``return`` among its body's own statements:
    the rule by which the grading child itself calls a name a stub (``transformer_spec.pytest_plugin.stubs``), so that a pass it
    claims for a test using the name is one an honest child never reports."""
    return stubs.is_stub_def(node)


def _stub_definition(node: ast.AST) -> bool:
    """A stub function, or a class one of whose methods is a stub (but a method that is a contract name of its
    own, as ``MiniGPT.generate``): as the grading child's stub rule reads them."""
    if isinstance(node, ast.ClassDef):
        methods = {name.split(".", 1)[1] for name in contract.by_name() if name.startswith(node.name + ".")}
        return any(_is_stub_function(s) and s.name not in methods for s in node.body)
    return _is_stub_function(node)


def _cannot_compile(source: str, filename: str) -> bool:
    """Whether this Python refuses ``source`` as a syntax error (then no import of it runs)."""
    with _PARSE_LOCK:
        try:
            compile(source, filename, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError:
            return True
        except (ValueError, RecursionError, MemoryError, SystemError):
            return False
    return False


def stub_components(root: Path, profile=None) -> set[str]:
    """The components every name of which (:func:`_names_reached`) the files under ``root`` define only as stubs
    (a function whose body only raises ``NotImplementedError``, a class whose ``forward`` does), never bound
    otherwise (a re-export by a relative import of the same name aside). An honest grading child reports no pass
    for a test that uses a stub (the stub rule, docs/grading.md): a pass claimed there is false (issue 45: the
    handout's stub adapters with a forged report got 93.47). Empty where the reading cannot be sure
    (:func:`stubs_read_for_sure`; the grader then asks the re-check child, :func:`components_of_stubs`)."""
    defined = _stub_bindings(root)
    if defined is None:
        return set()
    return {c.name for c in registry.components()
            if (own := _names_reached(c, profile)) and all(defined.get(n) and all(defined[n]) for n in own)}


def stubs_read_for_sure(root: Path) -> bool:
    """Whether the files under ``root`` say every binding of a name (no ``vars()``, ``exec``, ``setattr``, ...):
    where they do not, only the loaded code can show a stub."""
    return _stub_bindings(root) is not None


def components_of_stubs(stub_names: Iterable[str], profile=None) -> set[str]:
    """The components every name of which (:func:`_names_reached`) is in ``stub_names`` (the names that are stubs
    as the submission is loaded, :func:`transformer_spec.pytest_plugin.stubs.loaded_stub_names`)."""
    found = set(stub_names)
    return {c.name for c in registry.components() if (own := _names_reached(c, profile)) and set(own) <= found}


def _stub_bindings(root: Path) -> dict[str, list[bool]] | None:
    """Every name the files under ``root`` bind -> for each binding, whether it is a stub definition; None where
    the reading cannot be sure."""
    sources = _sources(root)
    if sources is None:
        return None
    defined: dict[str, list[bool]] = {}  # name -> for each binding, whether it is a stub definition
    for filename, source in sources:
        tree = parse(source, filename)
        if tree is None and _cannot_compile(source, filename):
            continue  # this Python cannot run it (the handout's conftest.py is 3.12 syntax): it binds nothing
        if tree is None:
            return None
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in _REBINDS or isinstance(node, ast.Attribute) \
                    and node.attr in _REBINDS or isinstance(node, ast.Constant) and node.value in _REBINDS:
                return None
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.setdefault(node.name, []).append(_stub_definition(node))
            elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) or \
                    isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
                defined.setdefault(getattr(node, "id", None) or node.attr, []).append(False)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    same = isinstance(node, ast.ImportFrom) and node.level > 0 and alias.asname in (None, alias.name)
                    if not same:
                        defined.setdefault(alias.asname or alias.name.split(".")[0], []).append(False)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                for name in node.names:
                    defined.setdefault(name, []).append(False)
            elif isinstance(node, ast.arg):
                defined.setdefault(node.arg, []).append(False)
    return defined
