"""The measurements behind ``python -m tools.bench``, importable one at a time.

* :mod:`.timing`    -- a table row, the side-by-side timing loop and the Markdown table.
* :mod:`.graded_run` -- the graded run of one submission (``pytest spec_tests properties``) in a
  fresh process, against a bare torch import or against itself with pytest-xdist.
* :mod:`.torch_gpt` -- MiniGPT rebuilt from ``nn.TransformerEncoderLayer``: the training baseline.
* :mod:`.workloads` -- attention, a training step and generation, in this process, and their profiles.
"""
