"""Build the adversarial corpus: ``build(dest) -> {student: Expect}``.

Graded with ``spec_tests/test_torch_oracle.py`` (see ``tests/test_grade_class.py``), whose test
order is: scaled_dot_product_attention, multi-head attention, feed-forward, encoder, decoder.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from tests.notebook_helpers import write_notebook
from transformer_spec.catalogue.patching import INDEPENDENT_IMPL, REFERENCE_DIR, write_patched_reference

from . import hostile
from .names import build_names

SCALE = ("attention.py", "scale = 1.0 / math.sqrt(q.size(-1))", "scale = 1.0  # forgot 1/sqrt(d_k)")
SCORES = "    scores = torch.matmul(q * scale, k.transpose(-2, -1))  # (..., Lq, Lk)"
FFN = "        return self.linear2(self.dropout(F.gelu(self.linear1(x))))"


@dataclass
class Expect:
    status: str | tuple[str, ...]
    # "full", "zero", "buggy" (exactly the honest buggy grade), "at_most_buggy", "partial", or
    # "at_most_buggy_and_unchecked": at most the buggy grade plus the tests no hidden re-check checks
    # (what a forger whose code runs can still claim, docs/class_grading.md)
    points: str
    zero: tuple[str, ...] = ()  # components that must score 0
    full: tuple[str, ...] = ()  # components that must score their full points
    note: str = ""
    extra: dict = field(default_factory=dict)


def patched_package(dest: Path, name: str, patches=(), prepend: str = "", append: str = "") -> Path:
    pkg = write_patched_reference(dest, list(patches), name=name)
    init = pkg / "__init__.py"
    init.write_text(prepend + init.read_text() + append)
    return pkg


def _ffn(body: str):
    return ("feedforward.py", FFN, body)


def build(dest: Path) -> dict[str, Expect]:
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    ex: dict[str, Expect] = {}
    shutil.copytree(REFERENCE_DIR, dest / "correct", ignore=shutil.ignore_patterns("__pycache__"))
    ex["correct"] = Expect("ok", "full")
    patched_package(dest, "buggy", [SCALE])
    ex["buggy"] = Expect("ok", "partial", full=("ffn",), note="no 1/sqrt(d_k): attention and everything using it lose points")
    (dest / "syntax_error.py").write_text("def scaled_dot_product_attention(q, k, v:\n    return q\n")
    ex["syntax_error"] = Expect("import-error", "zero")
    patched_package(dest, "import_loop", prepend="while True:\n    pass\n")
    ex["import_loop"] = Expect("timeout", "zero")
    patched_package(dest, "forward_loop", [_ffn("        while True:\n            pass")])
    ex["forward_loop"] = Expect("timeout", "partial", zero=("ffn", "encoder", "decoder"), full=("attention", "mha"))
    patched_package(dest, "memory_bomb", [_ffn("        import torch\n        hog = []\n        while True:\n            hog.append(torch.empty(1 << 28))")])
    ex["memory_bomb"] = Expect("memory-limit", "partial", zero=("ffn", "encoder", "decoder"), full=("attention", "mha"))
    patched_package(dest, "exit_at_import", prepend="import sys\nsys.exit(0)\n")
    ex["exit_at_import"] = Expect("import-error", "zero")
    patched_package(dest, "os_exit_forward", [("attention.py", SCORES, "    import os\n    os._exit(0)\n" + SCORES)])
    # os._exit in a method fails the tests that call it, as in pytest (transformer_spec/guard/exits.py)
    ex["os_exit_forward"] = Expect("ok", "partial", zero=("attention", "mha", "encoder", "decoder"), full=("ffn",))
    patched_package(dest, "keyboard_interrupt", [_ffn("        raise KeyboardInterrupt")])
    ex["keyboard_interrupt"] = Expect("interrupted", "partial", zero=("ffn", "encoder", "decoder"),
                                      full=("attention", "mha"))
    patched_package(dest, "system_exit", [_ffn("        raise SystemExit(0)")])
    ex["system_exit"] = Expect("ok", "partial", zero=("ffn", "encoder", "decoder"), full=("attention", "mha"))
    patched_package(dest, "print_100mb", prepend=hostile.PRINT_100MB)
    ex["print_100mb"] = Expect("output-limit", "zero")
    patched_package(dest, "forged_files", [SCALE], prepend=hostile.FORGE_FILES)
    ex["forged_files"] = Expect("ok", "buggy")
    folder = dest / "conftest_all_pass"
    folder.mkdir()
    write_patched_reference(folder, [SCALE], name="my_transformer")
    (folder / "conftest.py").write_text(hostile.CONFTEST_ALL_PASS)
    (folder / "pytest.ini").write_text(hostile.PYTEST_INI)
    (folder / "pyproject.toml").write_text(hostile.PYPROJECT)
    (folder / "my_transformer" / "conftest.py").write_text(hostile.CONFTEST_ALL_PASS)
    ex["conftest_all_pass"] = Expect("ok", "buggy")
    patched_package(dest, "patch_allclose", [SCALE], prepend=hostile.PATCH_ALLCLOSE)
    ex["patch_allclose"] = Expect(("ok", "tampering"), "at_most_buggy")
    # A forger on the buggy code keeps what its code earns (the hidden twins confirm the passes the
    # buggy code really has: attention's cases with an explicit scale); the replays prove the lie.
    patched_package(dest, "patch_harness", [SCALE], prepend=hostile.PATCH_HARNESS)
    ex["patch_harness"] = Expect("tampering", "buggy", zero=("mha", "encoder", "decoder"))
    patched_package(dest, "edit_tests", [SCALE], prepend=hostile.EDIT_TESTS)
    # Its write into the suite's modules (assert_close replaced, at import) is the suite reached: refused, the
    # forbidden use recorded where it happened (module level: every test), as delegate_reference.
    ex["edit_tests"] = Expect("forbidden-api", "zero")
    patched_package(dest, "delete_tests", [SCALE], prepend=hostile.DELETE_TESTS)
    # The test files were collected before the submission is imported: deleting them changes nothing.
    ex["delete_tests"] = Expect("ok", "buggy")
    (dest / "delegate_reference.py").write_text("from reference import *  # noqa: F403\n")
    ex["delegate_reference"] = Expect("forbidden-api", "zero")
    patched_package(dest, "delegate_torch", [("attention.py", SCORES,
                                   "    return (torch.nn.functional.scaled_dot_product_attention(q, k, v, "
                                   "attn_mask=None if mask is None else ~mask, scale=scale), None)\n" + SCORES)])
    ex["delegate_torch"] = Expect("forbidden-api", "partial", zero=("attention", "mha", "encoder", "decoder"))
    patched_package(dest, "equal_to_anything", append=hostile.EQUAL_TO_ANYTHING)
    ex["equal_to_anything"] = Expect(("ok", "tampering"), "partial", zero=("attention",), full=("mha", "ffn"))
    # The same correct code handed in as a module and as a notebook (in a student's folder).
    shutil.copy(INDEPENDENT_IMPL, dest / "alt_module.py")
    ex["alt_module"] = Expect("ok", "full")
    write_notebook(INDEPENDENT_IMPL, dest / "alt_notebook" / "my_transformer.ipynb")
    ex["alt_notebook"] = Expect("ok", "full", note="a notebook: graded like the same code in a .py file")
    ex.update(build_names(dest, patched_package, _ffn, Expect, SCALE))
    return ex


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.adversarial.corpus",
                                     description="Write the adversarial class corpus (mixed submissions) to DEST.")
    parser.add_argument("dest", type=Path, help="folder to write the submissions into (created if missing)")
    args = parser.parse_args(argv)
    if args.dest.exists() and not args.dest.is_dir():
        parser.error(f"DEST {args.dest} is a file; give a folder")
    built = build(args.dest)
    print(f"wrote {len(built)} submissions to {args.dest}")
    return 0


if __name__ == "__main__":  # python -m tests.adversarial.corpus DEST
    raise SystemExit(main())
