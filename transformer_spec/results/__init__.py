"""What a graded test ends as, and the file it is written to.

:mod:`.outcomes`: one typed :class:`~.outcomes.Kind` per graded test (passed, assertion, error,
timeout, stub, forbidden, hidden re-check, ...), and the statuses derived from kinds, never from text.
:mod:`.results_file`: ``results.json`` (Gradescope's format), its one atomic writer and reader.

May use: the contract. Used by the loader, the pytest plugin and the class grader.
"""
