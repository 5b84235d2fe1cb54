"""transformer_spec.guard.fast_exit: a finished run ends without the interpreter's teardown, and only
when nothing can be lost (the exit status, the summary, a program that goes on after pytest)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

MARK = "EXIT-HANDLERS-RAN"

TESTS = textwrap.dedent(f"""
    import atexit

    atexit.register(lambda: print("{MARK}", flush=True))  # runs only if the interpreter shuts down normally


    def test_passes():
        pass
""")


@pytest.fixture
def project(tmp_path):
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["transformer_spec.guard.fast_exit"]\n')
    (tmp_path / "test_it.py").write_text(TESTS)
    return tmp_path


def run(cwd, *args, code=None):
    cmd = [sys.executable, *(("-c", code) if code else ("-m", "pytest")), *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_a_finished_run_skips_the_teardown_and_keeps_status_and_summary(project):
    proc = run(project, "-q", "-p", "no:cacheprovider")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout and MARK not in proc.stdout
    (project / "test_fails.py").write_text("def test_fails():\n    assert 1 == 2\n")
    proc = run(project, "-q", "-p", "no:cacheprovider")
    assert proc.returncode == 1 and "1 failed, 1 passed" in proc.stdout and MARK not in proc.stdout


@pytest.mark.parametrize("args", [("--no-fast-exit",), ("-o", "fast_exit=false")], ids=["option", "ini"])
def test_it_can_be_turned_off(project, args):
    proc = run(project, "-q", "-p", "no:cacheprovider", *args)
    assert proc.returncode == 0 and MARK in proc.stdout, proc.stdout + proc.stderr


def test_a_program_that_calls_pytest_goes_on_after_it(project):
    proc = run(project, code="import pytest, sys; code = pytest.main(['-q', '-p', 'no:cacheprovider']); "
                             "print('after pytest.main', int(code))")
    assert "after pytest.main 0" in proc.stdout and MARK in proc.stdout, proc.stdout + proc.stderr


def test_an_in_process_run_inside_a_run_does_not_end_the_outer_one(project):
    (project / "test_outer.py").write_text(textwrap.dedent("""
        import pytest

        def test_inner_run(tmp_path):
            (tmp_path / "test_x.py").write_text("def test_x():\\n    pass\\n")
            assert pytest.main([str(tmp_path), "-q", "-p", "no:cacheprovider", "-p", "transformer_spec.guard.fast_exit"]) == 0
    """))
    proc = run(project, "-q", "-p", "no:cacheprovider")
    assert proc.returncode == 0 and "2 passed" in proc.stdout and MARK not in proc.stdout, proc.stdout + proc.stderr


def test_a_usage_error_is_still_reported(project):
    proc = run(project, "-q", "--no-such-option")
    assert proc.returncode == 4 and "--no-such-option" in proc.stderr


def test_coverage_data_is_written_either_way(project):
    """pytest-cov writes its data before the last hook (the run may then end fast); under
    ``coverage run`` coverage is still measuring at the end, so the run ends normally."""
    pytest.importorskip("pytest_cov")
    proc = run(project, "-q", "-p", "no:cacheprovider", "--cov=.", "--cov-report=")
    assert proc.returncode == 0 and (project / ".coverage").is_file(), proc.stdout + proc.stderr
    (project / ".coverage").unlink()
    proc = subprocess.run([sys.executable, "-m", "coverage", "run", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=project, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and MARK in proc.stdout and (project / ".coverage").is_file(), proc.stdout + proc.stderr


def test_the_exit_comes_after_every_unconfigure_hook(project):
    """A plugin registered during the run with a trylast pytest_unconfigure (as the grading
    child's report channel is, which closes its pipe there) still runs before the exit."""
    (project / "conftest.py").write_text(textwrap.dedent('''
        import pytest

        pytest_plugins = ["transformer_spec.guard.fast_exit"]


        class Late:
            @pytest.hookimpl(trylast=True)
            def pytest_unconfigure(self, config):
                print("LATE-UNCONFIGURE-RAN", flush=True)


        def pytest_configure(config):
            config.pluginmanager.register(Late(), "late")
    '''))
    proc = run(project, "-q", "-p", "no:cacheprovider")
    assert proc.returncode == 0 and "LATE-UNCONFIGURE-RAN" in proc.stdout and MARK not in proc.stdout, \
        proc.stdout + proc.stderr


FROZEN = textwrap.dedent("""
    import gc


    def test_frozen():
        print("FROZEN", gc.get_freeze_count() > 0, flush=True)
""")


def test_what_lives_until_the_exit_is_frozen_only_when_the_run_is_the_program(project):
    """gc.freeze once collected: in ``python -m pytest``, not with the option off, not in a program that
    calls pytest (it goes on after the run, and its garbage must stay collectable)."""
    (project / "test_it.py").write_text(FROZEN)
    assert "FROZEN True" in run(project, "-q", "-s", "-p", "no:cacheprovider").stdout
    assert "FROZEN False" in run(project, "-q", "-s", "-p", "no:cacheprovider", "--no-fast-exit").stdout
    proc = run(project, code="import pytest; pytest.main(['-q', '-s', '-p', 'no:cacheprovider'])")
    assert "FROZEN False" in proc.stdout, proc.stdout + proc.stderr
