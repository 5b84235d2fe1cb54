"""The built-in components, one module each: a component's names, pitfalls, variations, behaviour
probes and hidden re-checks, declared once (``COMPONENT = Component(...)``). The registry finds them
at run time (:data:`transformer_spec.contract.registry.COMPONENTS_PACKAGE`), and everything else reads
them through it.

May use: the probes, the guard, the submission loader, the profiles, the contract.
"""
