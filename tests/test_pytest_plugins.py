"""The wheel's pytest11 entry point registers the suite's plugins for a run of the suite and for no
other run (``transformer_spec/pytest_plugins.py``; the installed case: tests/test_wheel.py)."""

from transformer_spec import layout, pytest_plugins
from transformer_spec.submission import loader


def test_a_run_naming_a_submission_or_inside_the_suite_is_the_suites(tmp_path):
    suite_run = pytest_plugins.suite_run
    assert suite_run(["--impl", "mine.py"], environ={}) and suite_run(["-q", "--impl=mine.py"], environ={})
    assert suite_run([], environ={pytest_plugins.IMPL_ENV: "mine.py"})
    assert suite_run([str(layout.ROOT / "spec_tests" / "test_seed001_worked_example.py") + "::test_output_9_6"],
                     environ={})
    assert suite_run(["-q"], rootdir=layout.ROOT, environ={})  # transformer-spec check passes --rootdir


def test_a_course_own_run_is_not(tmp_path):
    own = tmp_path / "a_course_repository"
    (own / "tests").mkdir(parents=True)
    assert not pytest_plugins.suite_run([str(own / "tests"), "-q", "-k", "impl"], rootdir=own, environ={})
    assert not pytest_plugins.suite_run([], environ={})


def test_the_entry_point_reads_the_loaders_variable():
    assert pytest_plugins.IMPL_ENV == loader.ENV_VAR
