"""Failure messages a student reads: what went wrong, where, the smallest example, the re-run command.

Used by :mod:`transformer_spec.pytest_plugin.grading` for ``results.json``, ``feedback.md`` and the terminal.
Every message is built from data (the exception, its traceback, the arguments of the failing
call), never from another library's printed text:

* a hypothesis property's smallest failing example is the argument list of the last failing
  call of the test function (hypothesis replays the shrunk example last), recorded by wrapping
  the test through hypothesis's ``inner_test`` hook (:func:`wrap_inner_test`); values drawn
  from ``st.data()`` are recorded as they are drawn;
* each failure gets a :class:`~transformer_spec.results.outcomes.Kind`, which the grade and the
  diagnosis use instead of reading the message.
"""

from __future__ import annotations

import functools
import os
import shlex
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hypothesis.errors import UnsatisfiedAssumption

from transformer_spec import layout
from transformer_spec.contract import names as contract
from transformer_spec.files import relative
from transformer_spec.probes.testing import leaves  # noqa: F401 (failures.leaves: this module's API too)
from transformer_spec.profiles import calls as course_calls
from transformer_spec.results.outcomes import Kind, is_out_of_memory
from transformer_spec.submission import loader

if TYPE_CHECKING:  # pragma: no cover - annotations only: the re-check child runs without pytest
    import pytest

#: the longest repr of one argument shown in a failing example
MAX_ARG_REPR = 1500
EXAMPLE_HEADING = "The smallest failing example hypothesis found (the test's arguments):"
COURSE_EXAMPLE_HEADING = "The smallest failing example hypothesis found, as your functions were called (the last calls):"
COURSE_CALLS_HEADING = "Your functions were called so (the last calls before the failure):"


class NoShrink(BaseException):
    """A property example reached a stub (``NotImplementedError``), a missing name or a forbidden
    API: stop at once. Raised in place of that exception (its ``__cause__``) so that hypothesis,
    which does not catch BaseException, ends the test at the first example instead of shrinking
    an input that every example fails on anyway. Also raised, from the latest failure, when a
    property's shrinking has used its calls (:data:`SHRINK_CALLS`)."""


# --------------------------------------------------------------------------------------------
# Hypothesis examples, recorded from the failing calls' arguments
# --------------------------------------------------------------------------------------------
@dataclass
class Examples:
    """The arguments of the last failing calls of a property, by the exception they raised."""

    keep: int = 16
    #: (exception, the test's arguments, the course's calls it made under a profile: profiles.calls)
    recorded: list[tuple[BaseException, list[tuple[str, object]], list]] = field(default_factory=list)

    def record(self, exc: BaseException, arguments: list[tuple[str, object]], course_calls: list = ()) -> None:
        self.recorded.append((exc, arguments, list(course_calls)))
        del self.recorded[:-self.keep]

    def find(self, exc: BaseException) -> list[tuple[str, object]] | None:
        """The arguments of the call that raised ``exc`` (the same object), or None."""
        for raised, arguments, _ in reversed(self.recorded):
            if raised is exc:
                return arguments
        return None

    def course_calls(self, exc: BaseException) -> list | None:
        """The course's calls of the example that raised ``exc`` (None: no such example)."""
        for raised, _, made in reversed(self.recorded):
            if raised is exc:
                return made
        return None

    def clear(self) -> None:
        self.recorded.clear()


def _recording_data(value, drawn: list[tuple[str, object]], name: str):
    """Record the values a ``st.data()`` object draws (the object itself prints as ``data(...)``)."""
    from hypothesis.strategies import DataObject

    if not isinstance(value, DataObject):
        return
    draw = value.draw

    @functools.wraps(draw)
    def recording_draw(strategy, label=None):
        result = draw(strategy, label)
        drawn.append((f"{name}.draw #{len(drawn) + 1}" + (f" ({label})" if label is not None else ""), result))
        return result

    value.draw = recording_draw


#: calls of a property after its first failing example before the smallest failing example found
#: so far is reported (hypothesis would go on shrinking; a count, not a time, so that every
#: grading of a submission shows the same example)
SHRINK_CALLS = 25


def wrap_inner_test(inner, fixturenames, examples: Examples, shrink_calls: int = SHRINK_CALLS):
    """``inner`` (hypothesis's ``inner_test``) recording every failing call's arguments in
    ``examples``, raising :class:`NoShrink` for stubs and missing names, and ending the shrinking
    after ``shrink_calls`` more calls (with a :class:`NoShrink` from the last failure, whose
    example is the smallest found: hypothesis tries smaller examples only)."""
    fixtures = set(fixturenames)
    latest: BaseException | None = None  # the latest failure of this test, once there is one
    calls = 0

    @functools.wraps(inner)
    def inner_test(*args, **kwargs):
        nonlocal calls, latest
        if latest is not None:
            calls += 1
        # The last call runs whole before shrinking ends: a property drawing inside the test
        # (``st.data()``) must draw what it drew before for the same start, or hypothesis reports
        # its own FlakyStrategyDefinition ("stopped drawing earlier") instead of the example.
        last = latest is not None and calls > shrink_calls
        drawn: list[tuple[str, object]] = []
        for name, value in kwargs.items():
            _recording_data(value, drawn, name)
        start = course_calls.mark()
        try:
            result = inner(*args, **kwargs)
        except UnsatisfiedAssumption:
            # not a failure: the example was invalid (``assume``). On the last call the smallest
            # failing example is the latest failure's, as when the call passes.
            if last:
                raise NoShrink(str(latest)) from latest
            raise
        except Exception as exc:
            from hypothesis.strategies import DataObject

            given = [(n, v) for n, v in kwargs.items() if n not in fixtures and not isinstance(v, DataObject)]
            examples.record(exc, given + drawn, course_calls.since(start))
            latest = exc
            if last or isinstance(exc, (NotImplementedError, loader.SubmissionError)):
                raise NoShrink(str(exc)) from exc
            raise
        if last:  # it passed: the smallest failing example is the latest failure's
            raise NoShrink(str(latest)) from latest
        return result

    return inner_test


def _short_repr(value) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # noqa: BLE001 - a submission's object may fail to print
        text = f"<unprintable {type(value).__name__}: {type(exc).__name__}>"
    if len(text) > MAX_ARG_REPR:
        text = text[:MAX_ARG_REPR] + f"... ({len(text) - MAX_ARG_REPR} more characters)"
    return text


def format_example(arguments: list[tuple[str, object]]) -> list[str]:
    """The lines that show a failing example: the heading, then ``name = value`` per argument."""
    if not arguments:
        return []
    lines = [EXAMPLE_HEADING]
    for name, value in arguments:
        text = _short_repr(value).splitlines() or [""]
        lines.append(f"  {name} = {text[0]}")
        lines.extend("  " + " " * (len(name) + 3) + line for line in text[1:])
    return lines


# --------------------------------------------------------------------------------------------
# Where an exception comes from
# --------------------------------------------------------------------------------------------
def leaf_exception(exc: BaseException) -> BaseException:
    """The exception that explains ``exc``: the first of a group, the cause of a :class:`NoShrink`."""
    first = leaves(exc)[0]
    return first.__cause__ if isinstance(first, NoShrink) and first.__cause__ is not None else first


def submission_frame(exc: BaseException, paths: list[str]):
    """The innermost traceback entry in the submission's own files (``paths``), or None."""
    found = None
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if any(filename == p or filename.startswith(p + os.sep) for p in paths):
            found = tb
        tb = tb.tb_next
    return found


def where(tb) -> str:
    code = tb.tb_frame.f_code
    name = getattr(code, "co_qualname", code.co_name)
    return f"{relative(code.co_filename)}:{tb.tb_lineno} in {name}"


def contract_name_of(qualname: str) -> str | None:
    """The contract name a function belongs to: ``MiniGPT.generate``, ``MultiHeadAttention``..."""
    parts = qualname.split(".")
    known = contract.by_name()
    for i in range(len(parts), 0, -1):
        candidate = ".".join(parts[:i])
        if candidate in known:
            return candidate
    return None


def describe_not_implemented(exc: BaseException, paths: list[str]) -> str:
    tb = submission_frame(exc, paths)
    message = str(exc).strip() or "not implemented yet"
    return f"NotImplementedError: {message} (at {where(tb)})" if tb is not None else f"NotImplementedError: {message}"


def shell_word(text: str) -> str:
    """``text`` as one word of a POSIX shell command line: as it is when it holds only safe characters, else in
    single quotes (``shlex.quote``). A student's folder may be named ``$(id)``: a pasted line must not run it."""
    return shlex.quote(text)


def shell_test_id(nodeid: str) -> str:
    """A test id as the re-run line shows it: in double quotes, as before, where that is safe (the suite's ids),
    else single-quoted."""
    return f'"{nodeid}"' if not any(c in nodeid for c in '$`\\"!') else shlex.quote(nodeid)


def reproduce_command(item: pytest.Item) -> str:
    """The command that re-runs ``item``, every argument quoted for a POSIX shell (issue 45)."""
    impl = shell_word(item.config.getoption("--impl") or loader.resolve_target(None))
    chosen = selection_options(item.config)
    if not layout.IN_CLONE:  # the installed suite: its test paths are the console script's to resolve
        return f"transformer-spec check {impl}{chosen} {shell_test_id(item.nodeid)}"
    return f"pytest --impl {impl}{chosen} {shell_test_id(item.nodeid)}"


def selection_options(config: pytest.Config) -> str:
    """The options that choose what this run grades, as the re-run command must repeat them: the
    profile when it is not the contract's own names (it implies its track), else the track when it is
    not the default."""
    from transformer_spec.contract import tracks
    from transformer_spec.pytest_plugin.plugin import profile, track

    return profile(config).rerun() or (f" --track {track(config)}" if track(config) != tracks.DEFAULT else "")


def signature_hint(uses: Iterable[str]) -> str:
    """For a TypeError raised before any line of the submission ran: the call did not fit the
    signature (a parameter named otherwise, one missing). The contract rows say what to write."""
    known = contract.by_name()
    rows = [f"  {known[n].row}" for n in sorted(set(uses)) if n in known]
    text = ("\nNo line of the submission ran: the test's call did not fit its signature. The tests pass "
            "arguments by the contract's names (docs/contract.md)")
    return text + (":\n" + "\n".join(rows) if rows else ".")


# --------------------------------------------------------------------------------------------
# The message of one failure
# --------------------------------------------------------------------------------------------
@dataclass
class Failure:
    """A failure as a student reads it (``text``, ending with the re-run command) and its kind."""

    text: str
    kind: Kind
    example: str = ""  # a property's smallest failing example (also inside ``text``)


def describe(item: pytest.Item, call: pytest.CallInfo, report: pytest.TestReport, paths: list[str],
             forbidden_message: str | None, timeout: float | None, examples: Examples,
             uses: Iterable[str] = (), made: list | None = None) -> Failure:
    """What went wrong, where, the smallest example (properties) and how to reproduce it.

    ``forbidden_message``: the first forbidden-API use of the test, if any; ``timeout``: the
    pytest-timeout limit when it stopped the test (else None); ``uses``: the contract names the
    test used (their contract rows are quoted when a call did not fit the submission's signature);
    ``made``: under a course profile, the course's calls since the test began (:mod:`.profiles.calls`):
    the example is then shown as those calls, in the course's words, not as the contract's arguments.
    """
    phase = "" if call.when == "call" else f" (during test {call.when})"
    reproduce = f"Reproduce: {reproduce_command(item)}"
    if forbidden_message is not None:
        return Failure(f"{forbidden_message}\n{reproduce}", Kind.FORBIDDEN)
    if call.excinfo is None:
        return Failure(f"{report.longreprtext.strip()}\n{reproduce}", Kind.OTHER)
    exc = leaf_exception(call.excinfo.value)
    if isinstance(exc, loader.SubmissionImportError):
        return Failure(f"{exc}{phase}\n{reproduce}", Kind.IMPORT)
    if isinstance(exc, loader.SubmissionError):
        return Failure(f"{exc}{phase}\n{reproduce}", Kind.NOT_SUBMITTED)
    if timeout is not None:
        tb = submission_frame(exc, paths)
        running = f"; it was running {where(tb)}" if tb is not None else ""
        return Failure(f"timed out after {timeout:g} s{phase}: the test did not finish in time "
                       f"(an endless loop, or far too slow?){running}\n{reproduce}", Kind.TIMEOUT)
    if isinstance(exc, NotImplementedError) and submission_frame(exc, paths) is not None:
        return Failure(f"{describe_not_implemented(exc, paths)}{phase}\n{reproduce}", Kind.STUB)
    if isinstance(exc, AssertionError):
        kind = Kind.ASSERTION
        headline = f"{str(exc).strip() or 'assertion failed'}{phase}"
    else:
        kind = Kind.MEMORY if is_out_of_memory(exc) else Kind.ERROR
        message = str(exc).strip()
        headline = f"{type(exc).__name__}{': ' + message if message else ''}{phase}"
        tb = submission_frame(exc, paths)
        if tb is not None:
            headline += f"\nraised at {where(tb)}"
        elif isinstance(exc, TypeError) and paths:
            headline += signature_hint(uses)
    lines = [headline]
    in_course = examples.course_calls(exc)
    if in_course:
        example = course_calls.format_calls(in_course, COURSE_EXAMPLE_HEADING)
    elif in_course is None and made:
        example = course_calls.format_calls(made, COURSE_CALLS_HEADING)
    else:
        example = format_example(examples.find(exc) or [])
    if example:
        lines += ["", *example]
    lines.append(reproduce)
    return Failure("\n".join(lines), kind, "\n".join(example))


def developer_view(config: pytest.Config) -> bool:
    """``-vv`` or an explicit ``--tb`` keeps pytest's own tracebacks in the terminal."""
    return config.getoption("verbose") >= 2 or config.getoption("tbstyle") not in ("auto", None)


def timed_out(item: pytest.Item, call: pytest.CallInfo, timeouts: dict[str, tuple[float, float]]) -> float | None:
    """pytest-timeout's limit when it is what stopped ``call`` (it fails the test when it fires)."""
    limit, started = timeouts.get(item.nodeid, (None, 0.0))
    if limit is None or limit <= 0 or call.excinfo is None:
        return None
    import pytest  # the plugin's function: the re-check child imports this module without pytest

    # The timer runs from the start of setup (or of the call): a Failed that came at its limit.
    if call.excinfo.errisinstance(pytest.fail.Exception) and time.monotonic() - started >= 0.95 * limit:
        return limit
    return None
