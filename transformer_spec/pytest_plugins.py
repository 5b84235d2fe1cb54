"""The ``pytest11`` entry point of an installed transformer-spec: loads the suite's plugins
(:data:`transformer_spec.layout.PLUGINS`), so the installed suite needs no conftest.py.

In a clone the root ``conftest.py`` loads them instead, as it always did, so a clone's runs do
not change with its editable install; a run with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` (the class
grader's children) loads them from the conftest.py of its copy of the suite.
"""

from .layout import IN_CLONE, PLUGINS

pytest_plugins = [] if IN_CLONE else list(PLUGINS)
