"""The submission loader: the one place that decides which implementation is under test.

``TARGET`` is, in this order of preference,

* the ``--impl`` option of pytest (or of a tool),
* the environment variable ``TRANSFORMER_IMPL``,
* ``reference``, the project's own implementation.

A target is an importable module name (``reference``, ``mypkg.transformer``), a path to a
``.py`` file, or a path to a package folder (one with ``__init__.py``). Loading never raises:
a submission that cannot be imported (syntax error, exception or ``sys.exit`` at import time,
missing dependency), or (with ``require_contract``, as in a graded run) that imports but defines
none of the contract's names (an empty file, the wrong file), gives a :class:`Submission` whose every use raises
:class:`SubmissionImportError` with one line naming the cause (``error``) and one saying how to
fix it (``fix``); a name the submission does not define raises :class:`NotSubmitted` only where
it is used.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from transformer_spec import layout
from transformer_spec.contract import names as contract
from transformer_spec.results.outcomes import Kind, kind_of_import_failure
from transformer_spec.submission import notebooks, repository
from transformer_spec.submission.errors import (  # noqa: F401 - the loader's errors and messages, re-exported
    NotSubmitted,
    SubmissionError,
    SubmissionImportError,
    SymlinkOutside,
    describe_import_failure,
    how_to_fix,
)

ENV_VAR = "TRANSFORMER_IMPL"
DEFAULT_TARGET = "reference"



def outside_symlinks(path: Path) -> list[tuple[Path, Path]]:
    """``(link, real target)`` for every symlink of the submission at ``path`` whose real target is
    outside its folder: anything under a package folder, or a ``.py`` file beside a single file
    (a helper it may import; the single file itself may be a link)."""
    path = Path(path)
    if path.is_dir():
        root, links = path.resolve(), []
        for folder, dirs, files in os.walk(path):
            links += [Path(folder) / n for n in dirs + files if (Path(folder) / n).is_symlink()]
    else:
        root = path.resolve().parent
        links = [p for p in root.glob("*.py") if p.is_symlink()]
    out = []
    for link in sorted(links):
        try:
            real = link.resolve()
        except (RuntimeError, OSError):  # a loop of links (Python < 3.13 raises RuntimeError)
            out.append((link, Path(f"{os.readlink(link)} (a loop of links)")))
            continue
        if real != root and root not in real.parents:
            out.append((link, real))
    return out


def refuse_outside_symlinks(path: Path) -> None:
    """Raise :class:`SymlinkOutside` (one line) if ``path`` has a symlink leaving its folder."""
    bad = outside_symlinks(path)
    if bad:
        link, real = bad[0]
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise SymlinkOutside(f"{link.name} is a symlink to {real}, outside the submission's folder{more}; "
                             f"only the submission's own files are graded")


def resolve_target(option: str | None = None, environ: dict | None = None) -> str:
    """The target to load: ``option`` if given, else ``$TRANSFORMER_IMPL``, else ``reference``."""
    environ = os.environ if environ is None else environ
    return option or environ.get(ENV_VAR) or DEFAULT_TARGET


class Submission:
    """The implementation under test. Attribute access returns the submission's names.

    ``submission.MultiHeadAttention`` is the submission's class; a missing contract name raises
    :class:`NotSubmitted`, and everything raises :class:`SubmissionImportError` if the
    submission could not be imported.
    """

    def __init__(self, target: str, module: ModuleType | None, error: str | None, fix: str | None = None,
                 error_kind: Kind | None = None):
        self.target = target
        self.module = module
        self.error = error  # one line: why the submission cannot be graded at all (None: it can)
        self.fix = fix  # one line: what to do about ``error``
        # what kind of problem ``error`` is: Kind.IMPORT, Kind.MEMORY or Kind.FORBIDDEN
        self.error_kind = error_kind if error_kind is not None or error is None else Kind.IMPORT
        #: called with every name looked up (the grading plugin records which names a test uses)
        self.watchers: list[Callable[[str], None]] = []
        #: under a course profile, the course's own module as loaded (its adapter file), before ``build``
        self.course: ModuleType | None = None

    @property
    def origin(self) -> str:
        """Where the code under test lives (a file or folder), for report headers."""
        if self.module is None:
            return self.target
        return getattr(self.module, "__file__", None) or self.target

    def has(self, name: str) -> bool:
        """Whether the submission was imported and defines ``name`` (``"MiniGPT.generate"`` too)."""
        try:
            self.get(name)
        except SubmissionError:
            return False
        return True

    def get(self, name: str):
        """The submission's ``name``; dotted names such as ``MiniGPT.generate`` reach methods.
        Every lookup is reported to :attr:`watchers`."""
        for watch in self.watchers:
            watch(name)
        return self.resolve(name)

    def resolve(self, name: str):
        """:meth:`get` without telling the watchers (for looking at the code, not using it)."""
        if self.error is not None:
            raise SubmissionImportError(self.error)
        obj = self.module
        for part in name.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError:
                raise NotSubmitted(_not_submitted_message(name)) from None
        return obj

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return self.get(name)

    def __repr__(self) -> str:
        state = f"error={self.error!r}" if self.error else f"origin={self.origin!r}"
        return f"Submission({self.target!r}, {state})"


def _not_submitted_message(name: str) -> str:
    entry = contract.by_name().get(name)
    if entry is None:
        return f"`{name}` is not defined by the submission"
    return (
        f"`{name}` is not defined by the submission (component '{entry.component}'); "
        f"the contract asks for: {entry.row}"
    )


def _is_path(target: str) -> bool:
    """Paths are loaded from the file system; anything else is imported by module name."""
    if target.endswith((".py", notebooks.SUFFIX)) or os.sep in target or "/" in target:
        return True
    return Path(target).exists() and not _importable(target)


def _module_name_for(path: Path) -> str:
    """A module name unique to the file or folder, so two submissions that share a file name
    (every student's ``transformer.py``) never share ``sys.modules`` entries."""
    stem = path.stem if path.suffix in (".py", notebooks.SUFFIX) else path.name
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
    safe = re.sub(r"\W", "_", stem)
    return f"_submission_{safe}_{digest}"


def _import_from_path(target: str) -> ModuleType:
    path = Path(target).expanduser().resolve()
    if not path.exists():
        raise FileNotFoundError(f"no such file or folder: {target}")
    refuse_outside_symlinks(path)
    if path.is_dir():
        init = path / "__init__.py"
        if not init.exists():
            raise FileNotFoundError(
                f"{target} is a folder without __init__.py; point --impl at a .py file or a package folder"
            )
        spec = importlib.util.spec_from_file_location(
            _module_name_for(path), init, submodule_search_locations=[str(path)]
        )
    elif path.suffix == ".py":
        spec = importlib.util.spec_from_file_location(_module_name_for(path), path)
    elif path.suffix == notebooks.SUFFIX:
        return _import_notebook(path)
    else:
        raise FileNotFoundError(f"{target} is neither a .py file, a notebook (.ipynb) nor a package folder")
    return _run_as_module(importlib.util.module_from_spec(spec), path, spec.loader.exec_module)


def _import_notebook(path: Path) -> ModuleType:
    """The notebook's code cells run in order as one module (:mod:`transformer_spec.submission.notebooks`);
    the lines it skipped are the module's ``__notebook_notes__``."""
    source = notebooks.read(path)
    module = ModuleType(_module_name_for(path))
    module.__file__ = str(path)
    module.__notebook_notes__ = list(source.notes)
    return _run_as_module(module, path, lambda m: notebooks.run(source, m))


def _run_as_module(module: ModuleType, path: Path, run: Callable[[ModuleType], object]) -> ModuleType:
    """Register ``module`` (the submission at ``path``) and ``run`` its code in it.

    A path loaded again in the same process (a student re-running after an edit) is imported
    afresh, submodules included. The module is registered before it runs so that relative
    imports inside a package folder resolve; its parent folder goes at the end of sys.path so
    sibling modules import without shadowing installed packages. A module whose code fails is
    not left registered.
    """
    name = module.__name__
    for old in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[old]
    sys.modules[name] = module
    parent = str(path.parent)
    if parent not in sys.path:
        sys.path.append(parent)
    try:
        run(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _import_adapter(adapter: Path) -> ModuleType:
    """A course's adapter file as a module of the package its folder makes (the course's own tests
    import it as ``tests.adapters``), under a name unique to the folder, so that its relative imports
    (``from .common import ...``) resolve as they do there."""
    folder = adapter.parent
    package = _module_name_for(folder)
    init = folder / "__init__.py"
    if init.is_file():
        spec = importlib.util.spec_from_file_location(package, init, submodule_search_locations=[str(folder)])
        _run_as_module(importlib.util.module_from_spec(spec), folder, spec.loader.exec_module)
    else:  # a namespace package, as Python makes of a folder without __init__.py
        module = ModuleType(package)
        module.__path__ = [str(folder)]
        _run_as_module(module, folder, lambda m: None)
    spec = importlib.util.spec_from_file_location(f"{package}.{adapter.stem}", adapter)
    return _run_as_module(importlib.util.module_from_spec(spec), adapter, spec.loader.exec_module)


def _import(target: str) -> ModuleType:
    if _is_path(target):
        return _import_from_path(target)
    return importlib.import_module(layout.module_name(target))


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _defines_none(module: ModuleType) -> bool:
    return not any(hasattr(module, name) for name in contract.top_level())


def load(target: str | None = None, *, require_contract: bool = False, profile=None) -> Submission:
    """Import ``target`` (see :func:`resolve_target`) and wrap it; never raises.

    ``require_contract``: a module that defines none of the contract's names (an empty file, the
    wrong file) is an error too (the graded run's choice: nothing in it can earn a point).
    ``profile`` (a :class:`transformer_spec.profiles.Profile`): with an adapter file, ``target`` is a
    course's repository, reached through that file (:func:`_load_through`); with only a ``build``,
    ``target`` is loaded as any submission and ``build`` maps its names onto the contract's.
    """
    target = resolve_target(target)
    if profile is not None and profile.adapter is not None:
        return _load_through(profile, target)
    try:
        module = _import(target)
    except BaseException as exc:  # noqa: BLE001 - whatever a submission raises is reported, not propagated
        return Submission(target, None, describe_import_failure(target, exc), how_to_fix(target, exc),
                          kind_of_import_failure(exc))
    course = module
    if profile is not None and profile.build is not None:  # the course's names, mapped onto the contract's
        try:
            module = profile.build(module)
        except BaseException as exc:  # noqa: BLE001 - what the submission's names raise is reported
            return Submission(target, None, describe_import_failure(target, exc), how_to_fix(target, exc),
                              kind_of_import_failure(exc))
    if require_contract and _defines_none(module):
        top_level = contract.top_level()
        where = getattr(module, "__file__", None) or target
        return Submission(
            target, module,
            f"the submission {target!r} defines none of the contract's names ({', '.join(top_level[:3])}, ...; "
            f"{len(top_level)} in all): {where} is empty or not the submission",
            "point --impl at the file or package folder that defines them (docs/contract.md lists every name); "
            "a package folder must import them in its __init__.py")
    sub = Submission(target, module, None)
    sub.course = course if module is not course else None
    return sub


def _load_through(profile, target: str) -> Submission:
    """A course's repository: made importable as its install would make it (its packages and package
    metadata, :mod:`transformer_spec.submission.repository`), its adapter file (``profile.adapter``) imported with
    the repository's folder on ``sys.path`` as its own tests have it, then mapped onto the contract's
    names by ``profile.build``."""
    root = Path(target).expanduser().resolve()
    adapter = root / profile.adapter
    if not adapter.is_file():
        return Submission(target, None,
                          f"the {profile.name} profile grades a repository holding {profile.adapter}; {target} has none",
                          f"point --impl at the repository's folder (the one that holds {profile.adapter})")
    try:
        repository.activate(root)  # its packages and metadata, as its install would give them
    except OSError as exc:
        return Submission(target, None, describe_import_failure(str(adapter), exc), how_to_fix(str(adapter), exc))
    if str(root) not in sys.path:  # its top-level modules, behind what is installed
        sys.path.append(str(root))
    try:
        refuse_outside_symlinks(adapter)
        api = _import_adapter(adapter.resolve())
    except BaseException as exc:  # noqa: BLE001 - reported, as for any submission
        return Submission(target, None, describe_import_failure(str(adapter), exc), how_to_fix(str(adapter), exc),
                          kind_of_import_failure(exc))
    sub = Submission(target, profile.build(api), None)
    sub.course = api
    return sub
