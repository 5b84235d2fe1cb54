"""Command-line tools over the contract: run any of them with ``python -m tools.X --help``.

* :mod:`tools.train`   -- train ``MiniGPT`` (a synthetic reversal task or ``--text FILE``), plot
  the loss and the attention maps, save a checkpoint; ``torchrun`` for many processes.
* :mod:`tools.sample`  -- generate from a checkpoint written by :mod:`tools.train`.
* :mod:`tools.scaling` -- seed 000 section 8: softmax entropy and peak weight with and without
  the ``1/sqrt(d_k)`` scaling.

Every tool loads the implementation through :func:`transformer_spec.submission.loader.load` (``--impl``),
so it runs on the reference or on a student's submission alike.
"""
