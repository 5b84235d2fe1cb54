"""Whether an error message names an argument by its exact identifier, as a word.

The contract asks that a bad argument's error "names the argument". These helpers hold a message
to the argument's identifier as a word: ``seq_len`` passes, ``SEQ_LEN`` or ``XXseq_lenXX`` does not
(stricter than :func:`transformer_spec.testing.assert_raises_naming`, which accepts the name in any
case, anywhere). Used by ``test_bad_arguments.py`` and ``test_argument_defaults.py``.
"""

import re

import pytest

from transformer_spec.testing import assert_accepts


def names_as_word(message: str, name: str) -> bool:
    """``name`` occurs in ``message`` with no letter, digit or underscore on either side."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", message) is not None


def raises_naming_word(fn, name, what, valid=None):
    """``fn()`` must raise ValueError (or TypeError) whose message names ``name`` as a word; ``valid``,
    the same call with valid arguments (:func:`transformer_spec.testing.assert_accepts`), must not
    (None where the test has just made that call itself)."""
    if valid is not None:
        assert_accepts(valid, what, (name,))
    with pytest.raises((ValueError, TypeError)) as info:
        fn()
    message = str(info.value)
    assert names_as_word(message, name), (
        f"{what}: the message {message!r} should name the argument `{name}` (as a word)")
