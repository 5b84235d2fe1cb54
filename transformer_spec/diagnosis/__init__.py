"""Why a component failed: the named diagnosis of a failing submission.

:mod:`.diagnose` (compares the submission's behaviour features with each pitfall's and names the
mistake, :func:`~.diagnose.annotate`), :mod:`.catalogue` (the pitfalls' features, computed once and
cached), :mod:`.reach` (which features a component's probes can see), :mod:`.profiles` (the
diagnosis through a course's API) and :mod:`.accuracy` (recall and precision of the names:
``python -m transformer_spec.diagnosis.accuracy``).

May use: the catalogue, the components, the probes and everything below.
"""
