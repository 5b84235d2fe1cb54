"""Forbidden APIs: detect, while the submission runs, that it calls what it should write itself.

By default a submission may not use ``torch.nn.MultiheadAttention``,
``torch.nn.functional.scaled_dot_product_attention``,
``torch.nn.functional.multi_head_attention_forward``, the ``torch.nn.Transformer*`` layers, or
import ``reference`` (the rubric's ``forbidden`` list changes this; see ``docs/grading.md``).

How: :class:`Guard` replaces each forbidden function by a wrapper (and wraps each forbidden
class's ``__init__``) that looks at the call stack. If a frame on it belongs to the submission's
own files, or the object being built is an instance of a class the submission defined, the use
is recorded and :class:`ForbiddenAPIError` is raised. Calls made by the tests themselves (an
oracle computed with torch) have no submission frame on their stack and go through untouched.
A forbidden module (``reference``) is guarded at import: ``import reference`` from the
submission's files raises :class:`ForbiddenImport`.

Recorded uses are kept even when the submission catches the exception, so the grading plugin
fails the test in which they happened. Limits: the guard sees Python-level uses; private C
bindings such as ``torch._C._nn.scaled_dot_product_attention`` are not wrapped.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import importlib.util
import os
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from .files import relative
from .loader import SubmissionError
from .outcomes import Kind

#: The default list (the rubric's ``forbidden`` key replaces it).
DEFAULT_FORBIDDEN: tuple[str, ...] = (
    "torch.nn.MultiheadAttention",
    "torch.nn.functional.scaled_dot_product_attention",
    "torch.nn.functional.multi_head_attention_forward",
    "torch.nn.Transformer",
    "torch.nn.TransformerEncoder",
    "torch.nn.TransformerDecoder",
    "torch.nn.TransformerEncoderLayer",
    "torch.nn.TransformerDecoderLayer",
    "reference",
)

_WHY = "the assignment asks you to write this part yourself"


class ForbiddenAPIError(SubmissionError):
    """The submission used a forbidden API. The message names it and where it was used."""

    outcome_kind = Kind.FORBIDDEN  # how the grade classifies it (transformer_spec/outcomes.py)


class ForbiddenImport(ForbiddenAPIError, ImportError):
    """The submission imported a forbidden module (``reference``)."""


def submission_paths(target: str, origin: str | None = None) -> list[Path]:
    """The files and folders that hold the submission's own code, without importing it.

    A package (folder with ``__init__.py``, or a module name that resolves to one) is its whole
    folder; a single ``.py`` file is the file and the other ``.py`` files beside it (helpers it
    may import), except test files and ``conftest.py``.
    """
    path: Path | None = None
    if origin and os.path.exists(origin):
        path = Path(origin)
    elif target.endswith(".py") or os.sep in target or "/" in target or Path(target).exists():
        path = Path(target).expanduser()
    else:
        try:
            spec = importlib.util.find_spec(target)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin and os.path.exists(spec.origin):
            path = Path(spec.origin)
    if path is None or not path.exists():
        return []
    path = path.resolve()
    if path.is_dir():
        return [path]
    if path.name == "__init__.py":
        return [path.parent]
    paths = [path]
    for sibling in sorted(path.parent.glob("*.py")):
        if sibling != path and not sibling.name.startswith("test_") and sibling.name != "conftest.py":
            paths.append(sibling)
    return paths


class Use:
    """One recorded use of a forbidden API."""

    def __init__(self, api: str, where: str):
        self.api = api
        self.where = where

    @property
    def message(self) -> str:
        return f"forbidden API: the submission used `{self.api}`{self.where}; {_WHY}"

    def __repr__(self) -> str:
        return f"Use({self.api!r}, {self.where!r})"


class Guard:
    """Wraps the forbidden APIs for as long as it is installed.

    ``paths`` is a list (or a callable returning a list, read on each check) of the
    submission's files and folders. ``uses`` collects every detected use; the caller clears it
    between tests.
    """

    def __init__(self, apis: Iterable[str] = DEFAULT_FORBIDDEN,
                 paths: Iterable[Path] | Callable[[], Iterable[Path]] = ()):
        self.apis = tuple(apis)
        self._paths = paths
        self.uses: list[Use] = []
        self._undo: list[Callable[[], None]] = []
        self._modules: tuple[str, ...] = ()
        self._local = threading.local()

    # -- which code is the submission's -------------------------------------------------
    def paths(self) -> list[str]:
        raw = self._paths() if callable(self._paths) else self._paths
        return [str(Path(p).resolve()) for p in raw]

    def _is_submission_file(self, filename: str, paths: list[str]) -> bool:
        if not filename or filename.startswith("<"):
            return False
        for p in paths:
            if filename == p or filename.startswith(p + os.sep):
                return True
        return False

    def _submission_frame(self, depth: int = 2):
        """The innermost frame of the submission's code on the stack, or None."""
        paths = self.paths()
        if not paths:
            return None
        frame = sys._getframe(depth)
        while frame is not None:
            if self._is_submission_file(frame.f_code.co_filename, paths):
                return frame
            frame = frame.f_back
        return None

    def _class_is_submissions(self, cls: type) -> bool:
        module = sys.modules.get(getattr(cls, "__module__", ""), None)
        filename = getattr(module, "__file__", None)
        return bool(filename) and self._is_submission_file(str(Path(filename).resolve()), self.paths())

    def _record(self, api: str, frame) -> Use:
        where = ""
        if frame is not None:
            filename = frame.f_code.co_filename
            where = f" (at {relative(filename)}:{frame.f_lineno} in {frame.f_code.co_name})"
        use = Use(api, where)
        self.uses.append(use)
        return use

    # -- install / uninstall ---------------------------------------------------------------
    def install(self) -> Guard:
        modules = []
        for api in self.apis:
            owner, attr, obj = _resolve(api)
            if obj is None:  # a module: guarded at import
                modules.append(api)
            elif isinstance(obj, type):
                self._wrap_class(api, obj)
            elif callable(obj):
                self._wrap_function(api, owner, attr, obj)
            else:
                raise ValueError(f"forbidden API {api!r} is neither a module, a class nor a function")
        self._modules = tuple(modules)
        if modules:
            finder = _ForbiddenFinder(self)
            sys.meta_path.insert(0, finder)
            self._undo.append(lambda: sys.meta_path.remove(finder) if finder in sys.meta_path else None)
        # The finder sees every first import of a forbidden module. Only one that is imported
        # already (and is not the submission itself) needs the __import__ hook too, which is
        # kept out otherwise: a Python-level __import__ takes CPython off its fast path for
        # every import statement, torch's and hypothesis's lazy imports included (~10% of a run).
        if any(m in sys.modules and not self._module_is_submission(m) for m in modules):
            original_import = builtins.__import__
            guard = self

            def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
                if level == 0 and guard._is_forbidden_module(name):
                    guard._check_import(name)
                return original_import(name, globals, locals, fromlist, level)

            builtins.__import__ = guarded_import
            self._undo.append(lambda: setattr(builtins, "__import__", original_import))
        return self

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def __enter__(self) -> Guard:
        return self.install()

    def __exit__(self, *exc) -> None:
        self.uninstall()

    # -- the wrappers --------------------------------------------------------------------------
    def _wrap_function(self, api: str, owner, attr: str, original) -> None:
        guard = self

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            frame = guard._submission_frame()
            if frame is not None:
                use = guard._record(api, frame)
                raise ForbiddenAPIError(use.message)
            return original(*args, **kwargs)

        wrapper.__transformer_spec_forbidden__ = original
        setattr(owner, attr, wrapper)
        self._undo.append(lambda: setattr(owner, attr, original))

    def _wrap_class(self, api: str, cls: type) -> None:
        guard = self
        original = cls.__dict__.get("__init__")
        base_init = cls.__init__

        @functools.wraps(base_init)
        def __init__(obj, *args, **kwargs):
            frame = guard._submission_frame()
            if frame is not None or guard._class_is_submissions(type(obj)):
                use = guard._record(api, frame)
                raise ForbiddenAPIError(use.message)
            return base_init(obj, *args, **kwargs)

        cls.__init__ = __init__
        if original is None:
            self._undo.append(lambda: delattr(cls, "__init__"))
        else:
            self._undo.append(lambda: setattr(cls, "__init__", original))

    def _is_forbidden_module(self, name: str) -> bool:
        return any(name == m or name.startswith(m + ".") for m in self._modules)

    def _check_import(self, name: str) -> None:
        if getattr(self._local, "busy", False):
            return
        self._local.busy = True
        try:
            frame = self._submission_frame(depth=3)
            if frame is None:
                return
            # The reference importing its own modules is not a use (when it is the submission).
            if self._module_is_submission(name):
                return
            use = self._record(f"import {name}", frame)
        finally:
            self._local.busy = False
        raise ForbiddenImport(use.message)

    def _module_is_submission(self, name: str) -> bool:
        top = name.split(".")[0]
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return False
        origin = spec.origin if spec is not None else None
        return bool(origin) and self._is_submission_file(str(Path(origin).resolve()), self.paths())


class _ForbiddenFinder:
    """Catches ``importlib.import_module("reference")`` from the submission (not seen by __import__)."""

    def __init__(self, guard: Guard):
        self.guard = guard

    def find_spec(self, name, path=None, target=None):
        if self.guard._is_forbidden_module(name):
            self.guard._check_import(name)
        return None


def _resolve(api: str):
    """``(owner, attribute, object)`` for a dotted name; ``object`` is None for a module."""
    parts = api.split(".")
    for i in range(len(parts), 0, -1):
        module_name = ".".join(parts[:i])
        try:
            spec = importlib.util.find_spec(module_name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue
        if i == len(parts):
            return None, "", None
        owner = importlib.import_module(module_name)
        for part in parts[i:-1]:
            owner = getattr(owner, part)
        if not hasattr(owner, parts[-1]):
            break
        return owner, parts[-1], getattr(owner, parts[-1])
    raise ValueError(f"forbidden API {api!r}: no module, class or function of that name")


def validate(apis: Iterable[str]) -> None:
    """Raise ``ValueError`` naming the first entry of ``apis`` that resolves to nothing."""
    for api in apis:
        if not isinstance(api, str) or not api:
            raise ValueError(f"forbidden API entries must be dotted names, got {api!r}")
        _resolve(api)
