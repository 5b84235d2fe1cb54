"""The machinery around the specification, one subpackage per layer (docs/architecture.md), from the
bottom up: ``contract`` (the registry, the names, the tracks), ``results`` (typed outcomes,
results.json), ``profiles`` (a course's API), ``submission`` (loading what a student hands in),
``guard`` (what a submission may not do), ``scoring`` (the rubric), ``probes`` (how the suite calls a
submission), ``components`` (each component declared once), ``catalogue`` (pitfalls, variations,
placeholders), ``diagnosis``, ``pytest_plugin`` and ``grader`` (the class grader's engine). Each
layer imports only the layers below it (``lint-imports``)."""
