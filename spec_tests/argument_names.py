"""Whether an error message names an argument by its exact identifier, as a word.

The contract asks that a bad argument's error "names the argument". These helpers hold a message
to the argument's identifier as a word: ``seq_len`` passes, ``SEQ_LEN`` or ``XXseq_lenXX`` does not
(stricter than :func:`transformer_spec.probes.testing.assert_raises_naming`, which accepts the name in any
case, anywhere). Used by ``test_bad_arguments.py`` and ``test_argument_defaults.py``.
"""

import re

import pytest

from transformer_spec import profiles
from transformer_spec.probes.testing import assert_accepts


def names_as_word(message: str, name: str) -> bool:
    """``name`` occurs in ``message`` with no letter, digit or underscore on either side."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", message) is not None


def raises_naming_word(fn, name, what, valid=None):
    """``fn()`` must raise ValueError (or TypeError) whose message names ``name`` as a word; ``valid``,
    the same call with valid arguments (:func:`transformer_spec.probes.testing.assert_accepts`), must not
    (None where the test has just made that call itself)."""
    if valid is not None:
        assert_accepts(valid, what, (name,))
    with pytest.raises((ValueError, TypeError)) as info:
        fn()
    message = str(info.value)
    names = profiles.current().argument_names_of([name])  # a course's own name for it counts as well
    assert any(names_as_word(message, n) for n in names), (
        f"{what}: the message {message!r} should name the argument {' or '.join(f'`{n}`' for n in names)} (as a word)")


def misnamed(cases) -> list[str]:
    """The cases whose error does not name one of their arguments by its exact identifier, as a word.

    ``cases``: ``(id, call, names, valid)`` with ``call()`` the bad call and ``valid`` the
    ``(description, call)`` of the same call with valid arguments (:func:`assert_accepts`)."""
    wrong = []
    for case, call, names, control in cases:
        names = profiles.current().argument_names_of(names)  # a course's own names count as well
        try:
            assert_accepts(control, case, names)
        except AssertionError as exc:
            wrong.append(str(exc))
            continue
        try:
            call()
        except (ValueError, TypeError) as exc:
            if not any(names_as_word(str(exc), n) for n in names):
                wrong.append(f"{case}: {type(exc).__name__}({str(exc)!r}) does not name {' or '.join(names)}")
        except Exception as exc:  # noqa: BLE001 - the wrong kind of error
            wrong.append(f"{case}: expected ValueError/TypeError, got {type(exc).__name__}: {exc}")
        else:
            wrong.append(f"{case}: nothing was raised")
    return wrong
