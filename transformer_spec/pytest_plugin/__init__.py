"""The pytest plugin: a run of the suite, graded.

:mod:`.plugin` (``--impl``, ``--track``, ``--profile``; the ``impl`` fixture), :mod:`.grading`
(thin hooks: points per component, the time limit, ``--grade-json``), :mod:`.run` (one graded
run's state), :mod:`.run_report` (the score table, the notes, results.json), :mod:`.failures` (the
failure text a student reads), :mod:`.stubs` (an untouched starter's stubs),
:mod:`.hypothesis_profiles` and :mod:`.hookspecs` (the plugin's own hook,
``pytest_transformer_spec_report``). The entry point that loads them is
:mod:`transformer_spec.pytest_plugins`.

May use: the diagnosis and everything below; never the class grader.
"""
