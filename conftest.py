"""Root conftest: loads the transformer-spec pytest plugin (``--impl``, the ``impl`` fixture)."""

pytest_plugins = ["transformer_spec.plugin", "transformer_spec.hypothesis_profiles", "transformer_spec.fast_exit",
                  "transformer_spec.grading"]
