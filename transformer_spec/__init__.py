"""The machinery around the specification: the contract's names, the submission loader,
the pytest plugin and the assertion helpers that the tests share."""
