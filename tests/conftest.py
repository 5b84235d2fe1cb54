"""The project's own tests: the slow set, and budgets for the tests whose module fixtures grade
whole submissions.

**The slow set** (issue 28). Integration tests that grade a class, build and install a wheel or a
bundle, or run a second full graded run carry ``@pytest.mark.slow`` (or a module's ``pytestmark``);
the root ``conftest.py`` leaves them out unless ``--slow`` is given.

**Budgets.**
pytest-timeout's limit (``timeout = 120`` in ``pyproject.toml``) covers a test's fixture setup
too, so the first test to use a module fixture that grades a class pays for the whole class.
Those fixtures get a budget of their own, far from what they take on a busy 2-core machine
(the corpus: 116 s alone on a quiet one), instead of failing with 26 errors when it is loaded.
Every other test keeps the 120 s limit, which is what a hanging student function meets.
"""

from __future__ import annotations

import pytest

#: module fixture -> seconds for any test that uses it (its setup runs in the first such test).
LONG_FIXTURES = {
    "corpus": 900,  # tests/test_grade_class.py: 20 submissions graded in isolated children
    "reference_results": 600,  # tests/test_grading.py: a full graded run of the reference
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        budgets = [LONG_FIXTURES[f] for f in getattr(item, "fixturenames", ()) if f in LONG_FIXTURES]
        if budgets and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(max(budgets)))
