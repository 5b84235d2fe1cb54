"""The adversarial corpus of ``tools.grade``: submissions that try to break or fool the grader.

``build(dest)`` writes every member into ``dest`` (one entry per "student") and returns
``{student: Expect}``: the status each must get and how its points compare with the honest
versions. Most members are the reference with a small patch (``transformer_spec.catalogue.patching``); the
hostile part is a few lines in ``hostile.py`` (text snippets added to a copy's ``__init__.py``).
"""
