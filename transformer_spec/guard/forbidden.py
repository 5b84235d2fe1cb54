"""Forbidden APIs: detect, while the submission runs, that it calls what it should write itself.

By default a submission may not use ``torch.nn.MultiheadAttention``, torch's ``scaled_dot_product_attention``
and ``multi_head_attention_forward``, the ``torch.nn.Transformer*`` layers, or import ``reference`` (the
rubric's ``forbidden`` list changes this; ``docs/grading.md``); whatever the rubric, never the suite's own
packages (:mod:`transformer_spec.guard.forbidden_suite`).

:class:`Guard` watches them in three layers; a use is recorded in ``uses`` and :class:`ForbiddenAPIError` is
raised (recorded uses are kept even when the submission catches it, so the plugin fails the test):

* Python level: each forbidden function is replaced by a wrapper (and each forbidden class's ``__init__``
  wrapped). A frame of the submission's own files on the stack, or an object of a class the submission
  defined, is a use named by the submission's line.
* Operator level (:mod:`transformer_spec.guard.forbidden_ops`): the aten operators behind the attention APIs,
  whatever the route (``torch._C._nn``, ``torch.ops.aten``, a thread, code compiled under another name).
* A forbidden module (``reference``): importing it (``import``, ``importlib``, in any thread) is refused, and
  so is opening its files by path (:mod:`transformer_spec.guard.forbidden_files`).

While the guard is ``armed`` (disarmed for the tests the plugin does not grade and for its diagnosis), the
operator level, the attention APIs and the forbidden modules are refused whatever the call stack, except
inside :func:`oracle`, where the suite computes its own expected values (its thread only). Other APIs a rubric
forbids are refused when the submission's frame is on the stack. What :meth:`Guard.install` put in place is its
:class:`Seal`, kept where the submission does not look; :meth:`Guard.check_seal` after each test (and re-check)
sees a guard removed from inside, charges the removal as a use and installs it again. Limits: the modules
above and ``docs/grading.md``.
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

import torch

from transformer_spec import layout
from transformer_spec.files import relative
from transformer_spec.guard import forbidden_files, forbidden_names, forbidden_ops, forbidden_suite
from transformer_spec.results.outcomes import Kind
from transformer_spec.submission.loader import SubmissionError

#: The suite computes an oracle value with torch's attention (see :mod:`.forbidden_ops`).
oracle = forbidden_ops.oracle

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


#: Refused whatever the call stack while the guard is armed (the suite's own uses are in oracle()).
STRICT = frozenset(forbidden_ops.OPERATORS)
#: Frames skipped when naming where a use that has no submission frame came from.
_NOT_THE_CALLER = tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, os)) + (
    os.path.dirname(os.path.dirname(__file__)) + os.sep, "<frozen ")  # the whole transformer_spec package


class ForbiddenAPIError(SubmissionError):
    """The submission used a forbidden API. The message names it and where it was used."""

    outcome_kind = Kind.FORBIDDEN  # how the grade classifies it (transformer_spec/results/outcomes.py)


class ForbiddenImport(ForbiddenAPIError, ImportError):
    """The submission imported a forbidden module (``reference``)."""


class Use:
    """One recorded use of a forbidden API."""

    def __init__(self, api: str, where: str, via: str = "", text: str | None = None):
        self.api = api
        self.where = where
        self.via = via  # how it was reached, if not by its own name
        self.text = text  # the whole message, for what is not a call (the guard removed)

    def __repr__(self) -> str:
        return f"Use({self.api!r}, {self.where!r})"

    @property
    def message(self) -> str:
        if self.text is not None:
            return self.text
        return f"forbidden API: the submission used `{self.api}`{self.via}{self.where}; {_WHY}"


class Seal:
    """What :meth:`Guard.install` put in place (the watches, the import finder, by identity), kept by the harness:
    :meth:`Guard.broken` compares the process with it, seeing a guard uninstalled, or installed again."""

    def __init__(self, ops, files, finder, modules: tuple[str, ...]):
        self.ops, self.files, self.finder, self.modules = ops, files, finder, modules

    def __repr__(self) -> str:
        return f"Seal({self.modules!r})"


class Guard:
    """Wraps the forbidden APIs for as long as it is installed. ``paths``: a list (or a callable returning one,
    read on each check) of the submission's files and folders; ``uses``: every use seen (cleared between tests)."""

    def __init__(self, apis: Iterable[str] = DEFAULT_FORBIDDEN,
                 paths: Iterable[Path] | Callable[[], Iterable[Path]] = ()):
        self.apis = tuple(apis)
        self._paths = paths
        self.uses: list[Use] = []
        self._undo: list[Callable[[], None]] = []
        self._modules: tuple[str, ...] = ()
        self._local = threading.local()
        #: Armed: the strict checks apply (the plugin disarms it outside the tests it grades).
        self.armed = True
        self._roots: dict[str, str] = {}  # real path of a forbidden module's folder or file -> its name

    def for_test(self, graded: bool) -> None:
        """A test starts: forget the uses of the last one; armed for a graded test only."""
        self.uses.clear()
        self.armed = graded

    def _strict(self) -> bool:
        """Whether a use with no submission frame on the stack is refused here and now."""
        return self.armed and not forbidden_ops.allowed()

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

    def _record(self, api: str, frame, via: str = "") -> Use:
        """Record a use at ``frame`` (the submission's), else at the innermost caller that is
        not torch, the standard library or this package (code compiled under another name)."""
        if frame is None:
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename.startswith(_NOT_THE_CALLER):
                frame = frame.f_back
        where = ""
        if frame is not None:
            filename = frame.f_code.co_filename
            where = f" (at {relative(filename)}:{frame.f_lineno} in {frame.f_code.co_name})"
        thread = threading.current_thread()
        if thread is not threading.main_thread():
            where += f" (in thread {thread.name!r})"
        use = Use(api, where, via)
        self.uses.append(use)
        return use

    # -- install / uninstall ---------------------------------------------------------------
    def install(self) -> Guard:
        modules = []
        for api in self.apis:
            owner, attr, obj = forbidden_names.resolve(api)
            if obj is None:  # a module: guarded at import ("reference": transformer_spec.reference in the wheel)
                modules.append(layout.module_name(api))
            elif isinstance(obj, type):
                self._wrap_class(api, obj)
            elif callable(obj):
                self._wrap_function(api, owner, attr, obj)
            else:
                raise ValueError(f"forbidden API {api!r} is neither a module, a class nor a function")
        modules += [m for m in forbidden_suite.SUITE_MODULES if m not in modules]
        self._modules = tuple(modules)
        ops = forbidden_ops.watch(self.apis, self._on_operator, lambda: self.armed)
        self._undo.append(lambda: forbidden_ops.unwatch(ops))
        files = forbidden_files.watch(self._module_roots(modules), self._on_file, lambda: self.armed)
        self._undo.append(lambda: forbidden_files.unwatch(files))
        finder = None
        if modules:
            finder = _ForbiddenFinder(self)
            sys.meta_path.insert(0, finder)
            self._undo.append(lambda: sys.meta_path.remove(finder) if finder in sys.meta_path else None)
        self.seal = Seal(ops, files, finder, self._modules)
        # The finder sees every first import of a forbidden module. Only one imported already (not the submission,
        # nor the suite's own, guarded by protect_suite) needs the __import__ hook too, kept out otherwise: a
        # Python-level __import__ slows every import statement, torch's lazy ones included (12 % of a graded run).
        if any(m in sys.modules and not self._module_is_submission(m) and not self._is_grader_module(m)
               for m in modules):
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

    # -- removed from inside -----------------------------------------------------------------
    def broken(self, seal: Seal) -> str | None:
        """What of the guard sealed by ``seal`` is no longer in place, or None. Only code in this
        process can remove it (the harness uninstalls it only after the last test), so a broken
        seal is proof: the submission removed the guard."""
        if not forbidden_ops.watching(seal.ops):
            return "its watch on torch's attention operators"
        if not forbidden_files.watching(seal.files):
            return f"its watch on the files of {', '.join(seal.modules)}"
        if seal.finder is not None and seal.finder not in sys.meta_path:
            return f"its import hook for {', '.join(seal.modules)}"
        return None

    def restore(self, seal: Seal) -> Seal:
        """Install the guard again if ``seal`` is broken; the seal to check from now on. After the
        submission's import: what the guard forbids is caught from then on, where each use costs
        what it costs (a removal at import gains nothing and is charged nothing)."""
        if self.broken(seal) is None:
            return seal
        self.uninstall()
        self.install()
        return self.seal

    def check_seal(self, seal: Seal, during: str) -> Seal:
        """If ``seal`` is broken, record the removal as a use (what ``during`` ran fails as a
        forbidden use: what calling the forbidden API itself would cost) and install the guard
        again (:meth:`restore`); the seal to check from now on."""
        what = self.broken(seal)
        if what is not None:
            self.uses.append(Use("the forbidden-API guard", "", text=(
                f"forbidden API: the grader's forbidden-API guard was removed ({what}) {during}; "
                f"removing it counts as using what it forbids, and {_WHY}")))
        return self.restore(seal)

    def __enter__(self) -> Guard:
        return self.install()

    def __exit__(self, *exc) -> None:
        self.uninstall()

    # -- the wrappers --------------------------------------------------------------------------
    def _wrap_function(self, api: str, owner, attr: str, original) -> None:
        guard = self

        strict = api in STRICT

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            frame = guard._submission_frame()
            if frame is not None or (strict and guard._strict()):
                use = guard._record(api, frame)
                raise ForbiddenAPIError(use.message)
            return original(*args, **kwargs)

        del wrapper.__wrapped__  # not a handle on the original
        setattr(owner, attr, wrapper)
        self._undo.append(lambda: setattr(owner, attr, original))

    def _wrap_class(self, api: str, cls: type) -> None:
        guard = self
        original = cls.__dict__.get("__init__")
        base_init = cls.__init__
        strict = api in STRICT

        @functools.wraps(base_init)
        def __init__(obj, *args, **kwargs):
            frame = guard._submission_frame()
            if frame is not None or guard._class_is_submissions(type(obj)) or (strict and guard._strict()):
                use = guard._record(api, frame)
                raise ForbiddenAPIError(use.message)
            return base_init(obj, *args, **kwargs)

        del __init__.__wrapped__
        cls.__init__ = __init__
        if original is None:
            self._undo.append(lambda: delattr(cls, "__init__"))
        else:
            self._undo.append(lambda: setattr(cls, "__init__", original))

    def protect_suite(self) -> None:  # the collection is over: the suite's modules, out of reach (forbidden_suite)
        self._undo.append(forbidden_suite.protect(self))

    def caller_in_submission(self):  # the submission's innermost frame under the caller's caller (busy: None)
        return None if getattr(self._local, "busy", False) else self._submission_frame(depth=3)

    def refuse_import(self, module: str, frame) -> None:
        """Record the import of ``module`` by the submission's code at ``frame`` and raise it."""
        self._local.busy = True
        try:
            use = self._record(f"import {module}", frame)
        finally:
            self._local.busy = False
        raise ForbiddenImport(use.message)

    _is_grader_module = staticmethod(forbidden_suite.is_suite_module)

    def _is_forbidden_module(self, name: str) -> bool:
        return any(name == m or name.startswith(m + ".") for m in self._modules)

    def _check_import(self, name: str) -> None:
        if getattr(self._local, "busy", False):
            return
        self._local.busy = True
        try:  # finding a module may import: the guard is busy meanwhile
            frame = self._submission_frame(depth=3)
            # the suite's own modules only from the submission's code; the reference importing itself (when it is
            # the submission) is no use
            allowed = frame is None and (not self._strict() or self._is_grader_module(name)) \
                or self._module_is_submission(name)
        finally:
            self._local.busy = False
        if not allowed:
            self.refuse_import(name, frame)

    def _on_operator(self, api: str, operator: str) -> None:
        """A forbidden aten operator was called (from :mod:`.forbidden_ops`, in any thread)."""
        use = self._record(api, self._submission_frame(), via=f" (through torch's operator `{operator}`)")
        raise ForbiddenAPIError(use.message)

    def _on_file(self, path: str) -> None:
        """A file of a forbidden module was opened by path (from :mod:`.forbidden_files`)."""
        module = next(m for root, m in self._roots.items() if path == root or path.startswith(root + os.sep))
        frame = self._submission_frame()
        if frame is None and self._is_grader_module(module):
            return  # the suite reading its own files (a traceback's lines, hypothesis's source)
        if os.sep + "__pycache__" + os.sep in path and path.endswith(f".{sys.implementation.cache_tag}.pyc"):
            path = importlib.util.source_from_cache(path)  # the source file it was compiled from
        use = self._record(module, frame, via=f" (its file {relative(path)}, opened by path)")
        raise ForbiddenImport(use.message)

    def _module_roots(self, modules: Iterable[str]) -> list[str]:
        """The folders (or files) of the forbidden modules, except one that is the submission."""
        roots = self._roots
        self._local.busy = True
        try:
            for name in modules:
                try:
                    spec = importlib.util.find_spec(name)
                except (ImportError, ValueError):
                    spec = None
                if spec is None or self._module_is_submission(name):
                    continue
                for root in spec.submodule_search_locations or ([spec.origin] if spec.origin else []):
                    roots[os.path.realpath(root)] = name
        finally:
            self._local.busy = False
        return list(roots)

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
