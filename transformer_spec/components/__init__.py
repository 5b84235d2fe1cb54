"""The built-in components, one module each (found by :func:`transformer_spec.registry.components`)."""
