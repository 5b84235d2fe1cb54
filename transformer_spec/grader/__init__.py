"""The class grader's engine: ``python -m tools.grade`` is its command line.

Parent side, in the order of a grading: :mod:`.settings` (limits, settings), :mod:`.submissions`
(one entry per student), :mod:`.sandbox` (the strongest tier that works: bubblewrap, a uid, ...),
:mod:`.launcher` and :mod:`.children` (a child under limits, with its report channel), :mod:`.suite`
(the suite snapshot, the pytest command, the skeleton), :mod:`.decision` (one submission: the
child's run, the parent's decision), :mod:`.rechecks` (the hidden re-checks of claimed passes),
:mod:`.absent` (components whose names the files cannot define), :mod:`.record`, :mod:`.feedback`,
:mod:`.output`, :mod:`.coverage_pages` (the outputs), :mod:`.report` (the instructor's report),
:mod:`.batch` (``grade_class``, ``merge``) and :mod:`.single` (Gradescope's one submission).
Child side, run inside the sandbox: :mod:`.isolation` (the pytest plugin that sends every report
frame over an authenticated pipe) and :mod:`.recheck` (the re-check child's program; the parent's
judgement of its answers).

May use: every layer below. The process that decides a grade never runs the submission.
"""
