"""Members of the class corpus whose *names and messages* attack the grader's outputs (issue 26).

Each file name or exception message below once stopped a whole batch, erased a classmate, or
wrote markup, a formula or terminal escapes into the instructor's files. Graded beside the rest of
the corpus (``tests/test_grade_class.py``), each must get what its code earns, under an id that is
safe text (``transformer_spec/grader/text.py``), with every entry of the folder in the gradebook.

``build_names(dest) -> {id: Expect}``; the ids are what the grader must call them.
"""

from __future__ import annotations

import os
import shutil
import unicodedata
from pathlib import Path

from transformer_spec.catalogue.patching import INDEPENDENT_IMPL

#: a message a Markdown reader would take for the end of its code block, raw HTML and a score
FENCE_MESSAGE = ("x\\n```\\n</code></pre><script>alert(1)</script>\\n**Score: 100 / 100**\\n````\\n"
                 "<img src=x onerror=alert(2)>")
#: a syntax error: graded at once (import-error), still through every output under its id
BROKEN = "def scaled_dot_product_attention(q, k, v:\n"


def build_names(dest: Path, patched_package, ffn, expect, scale) -> dict:
    """Write the members into ``dest``; ``patched_package``, ``ffn``, ``expect`` (``Expect``) and
    ``scale`` (the buggy baseline's patch) are the corpus's own (``tests/adversarial/corpus.py``)."""
    Expect, ex = expect, {}
    raise_in_ffn = '        raise RuntimeError("caf\\udce9 \\x1b[2J")'
    patched_package(dest, "text_surrogate_forward", [ffn(raise_in_ffn)])
    ex["text_surrogate_forward"] = Expect("ok", "partial", zero=("ffn", "encoder", "decoder"), full=("attention", "mha"),
                                          note="a lone surrogate and a terminal escape in FeedForward's exception")
    patched_package(dest, "text_surrogate_import", prepend='raise RuntimeError("caf\\udce9")\n')
    ex["text_surrogate_import"] = Expect("import-error", "zero")
    patched_package(dest, "text_fence", [ffn(f'        raise RuntimeError("{FENCE_MESSAGE}")')])
    ex["text_fence"] = Expect("ok", "partial", zero=("ffn", "encoder", "decoder"), full=("attention", "mha"),
                              note="a message that closes feedback.md's code block and writes HTML")

    def correct(name: str, student: str) -> None:
        shutil.copy(INDEPENDENT_IMPL, dest / name)
        ex[student] = Expect("ok", "full")

    def broken(name: str, student: str) -> None:
        (dest / name).write_text(BROKEN)
        ex[student] = Expect("import-error", "zero")

    correct("=2+5.py", "=2+5")  # a spreadsheet formula
    correct(os.fsdecode(b"caf\xe9.py"), "caf\\xe9")  # not UTF-8 (an LMS export unzipped elsewhere)
    correct("a$^$b.py", "a$^$b")  # mathtext, in the report's heatmap
    broken("bob\r0,0,0\rmallory.py", "bob\\x0d0,0,0\\x0dmallory")  # once split the gradebook's row
    broken("\x1b]0;owned\x07\x1b[2Keve.py", "\\x1b]0;owned\\x07\\x1b[2Keve")  # window title, erased line
    # Two entries, one stem: both graded, each under its own name.
    correct("carol.py", "carol.py")
    patched_package(dest, "carol", [scale])
    ex["carol"] = Expect("ok", "partial", full=("ffn",))
    # Look-alike ids (NFC and NFD): two rows that can be told apart; the canonical one keeps its own name.
    correct(unicodedata.normalize("NFC", "café.py"), "café")
    broken(unicodedata.normalize("NFD", "café.py"), "cafe\\u0301.py")
    # Entries that cannot be graded: a row each, with the reason.
    for name in ("UPPER.PY", "bob.py.txt", ".x.py", "__x.py"):
        (dest / name).write_text("x = 1\n")
        ex[name] = Expect("no-submission", "zero")
    (dest / "dangling.py").symlink_to(dest / "nowhere.py")
    ex["dangling.py"] = Expect("no-submission", "zero")
    (dest / "link_to_carol.py").symlink_to(dest / "carol.py")  # a classmate's file is not one's own
    ex["link_to_carol.py"] = Expect("no-submission", "zero")
    os.mkfifo(dest / "fifo")
    ex["fifo"] = Expect("no-submission", "zero")
    return ex
