"""How the suite calls a submission: the helpers of the tests, the behaviour probes and the
re-checks' declarations.

:mod:`.testing` (seeded parameters, calls under a profile, the errors a test expects),
:mod:`.assertions` (comparisons whose failure a student can act on), :mod:`.behaviour` (the
features the diagnosis compares), :mod:`.llama_shapes` (the modern track's shapes) and
:mod:`.recheck` (what a hidden re-check compares; its child program is
:mod:`transformer_spec.grader.recheck`).

May use: the guard, the submission loader, the profiles, the results, the contract.
"""
