"""What a submission may not do: forbidden APIs, files and operators; time limits; ending the process.

:mod:`.forbidden` (the guard a graded run arms: ``torch.nn.MultiheadAttention`` and the like),
:mod:`.forbidden_names` (a rubric's list checked), :mod:`.forbidden_ops` (the operators refused
whatever the call stack), :mod:`.forbidden_files` (reading the suite's files), :mod:`.forbidden_suite`
(importing the suite's own modules), :mod:`.alarm` (a time limit around a call), :mod:`.exits`
(``os._exit`` in a test fails that test) and :mod:`.fast_exit` (a finished run ends at once).

May use: the submission loader, the results, the contract.
"""
