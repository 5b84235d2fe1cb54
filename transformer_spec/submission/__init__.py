"""Which submission is loaded, and how: a file, a notebook, a package or a repository.

:mod:`.loader` (``--impl`` -> a module of contract names; never raises), :mod:`.notebooks` (a
notebook's code cells), :mod:`.repository` (a repository's own package, imported uninstalled),
:mod:`.errors` (the load errors a student reads, with the fix), :mod:`.coverage` (which files are
the submission's own, for ``--cov-submission``).

May use: the contract, the results, the profiles (a course's module is mapped onto the contract).
"""
