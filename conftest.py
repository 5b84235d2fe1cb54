"""Root conftest: loads the transformer-spec pytest plugins (``--impl``, the ``impl`` fixture, the
grading plugin): the list in :data:`transformer_spec.layout.PLUGINS`."""

from transformer_spec.layout import PLUGINS

pytest_plugins = list(PLUGINS)
