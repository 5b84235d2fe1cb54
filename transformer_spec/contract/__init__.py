"""The contract (docs/contract.md) in code: the bottom layer.

The registry of components (:mod:`.registry`: a component, its names, pitfalls, variations and
re-checks are declared once, in :mod:`transformer_spec.components`, and read from here), the
contract's names (:mod:`.names`), the tracks a component belongs to (:mod:`.tracks`) and the inputs
the suite draws (:mod:`.inputs`).

May use: :mod:`transformer_spec.layout` and :mod:`transformer_spec.files` only. Used by every layer above.
"""
