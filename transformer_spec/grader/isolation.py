"""The report channel between a grading child process and ``tools.grade`` (the parent).

A submission runs in a child process; what that child reports travels over an inherited pipe,
never over stdout (which the submission shares) or a file at a path it could guess:

* the parent makes two pipes: a *key* pipe (it writes a random 32-byte key and a little JSON,
  then closes it) and a *report* pipe (the child writes, the parent reads);
* their file descriptor numbers reach the child in the environment variable ``TRANSFORMER_SPEC_CHANNEL``;
  :func:`open_child_channel` (called in ``pytest_configure``, before the submission is imported)
  removes the variable, reads the key and closes the key pipe;
* every message is framed and authenticated: ``MAGIC | length | seq | payload | HMAC-SHA256(key,
  seq | payload)``; the parent (:class:`Reader`) drops the whole report of a child that sends
  one frame that does not verify.

What this does NOT stop (said in ``docs/class_grading.md``): code running inside the child can
still find the open descriptor (``/proc/self/fd``) and the key in memory, or patch the harness
to report passes. That is why the parent does not take the child's word for a pass: it
re-checks every passed component on hidden inputs in another process
(:mod:`transformer_spec.grader.recheck`).

Used as a pytest plugin in the child: ``-p transformer_spec.grader.isolation``. It implements the
grading plugin's hook ``pytest_transformer_spec_report`` (:mod:`transformer_spec.pytest_plugin.hookspecs`):
after collection, after every graded test and at the end it sends the run's report
(:func:`transformer_spec.results.outcomes.child_report`: node id, component, kind, message and
counterexample per test), so that a child killed or crashed mid-run still leaves the results of
the tests that finished.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import queue
import struct
import threading
from collections.abc import Iterator

import pytest

ENV_VAR = "TRANSFORMER_SPEC_CHANNEL"
MAGIC = b"TSR1"
KEY_BYTES = 32
_HEADER = struct.Struct(">4sIQ")  # magic, payload length, sequence number
_MAC_BYTES = 32
MAX_FRAME = 16 * 1024 * 1024  # a whole report of the suite is ~3 MB at most


def _mac(key: bytes, seq: int, payload: bytes) -> bytes:
    return hmac.new(key, struct.pack(">Q", seq) + payload, hashlib.sha256).digest()


def _frame(key: bytes, seq: int, payload: bytes) -> bytes:
    return _HEADER.pack(MAGIC, len(payload), seq) + payload + _mac(key, seq, payload)


def encode_frame(key: bytes, seq: int, obj) -> bytes:
    """One frame: ``MAGIC | length | seq | payload | HMAC``."""
    return _frame(key, seq, json.dumps(obj, separators=(",", ":")).encode())


class Reader:
    """Parent side: feed bytes read from the report pipe, get verified messages.

    ``forged`` becomes a reason string as soon as one frame is malformed, out of sequence or
    fails the HMAC; after that nothing more is accepted from this child.
    """

    def __init__(self, key: bytes):
        self._key = key
        self._buf = bytearray()
        self._seq = 0
        self.forged: str | None = None

    def feed(self, data: bytes) -> Iterator[dict]:
        if self.forged:
            return
        self._buf += data
        while len(self._buf) >= _HEADER.size:
            magic, length, seq = _HEADER.unpack_from(self._buf)
            if magic != MAGIC or length > MAX_FRAME:
                self.forged = "a malformed report frame"
                return
            end = _HEADER.size + length + _MAC_BYTES
            if len(self._buf) < end:
                return
            payload = bytes(self._buf[_HEADER.size:_HEADER.size + length])
            mac = bytes(self._buf[end - _MAC_BYTES:end])
            del self._buf[:end]
            if not hmac.compare_digest(mac, _mac(self._key, seq, payload)):
                self.forged = "a report frame with a wrong signature"
                return
            if seq != self._seq:
                self.forged = f"a report frame out of sequence ({seq}, expected {self._seq})"
                return
            self._seq += 1
            try:
                yield json.loads(payload)
            except ValueError:
                self.forged = "a report frame that is not JSON"
                return

    def finish(self) -> None:
        """The pipe reached EOF: a partial frame left over is a truncated write (a crash), not forgery."""
        self._buf.clear()


class ChildChannel:
    """Child side: sends authenticated frames to the parent.

    A writer thread writes the frames, in order, each one whole: Python runs signal handlers in
    the main thread only, so a handler that raises there (pytest-timeout's per-test alarm,
    Ctrl-C) cannot cut a frame in the middle of a pipe that the parent, paused, has let fill up.
    """

    def __init__(self, key: bytes, fd: int, extra: dict):
        self._key = key
        self._fd = fd
        self.extra = extra
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._latest: bytes | None = None  # the newest snapshot not written yet (send(..., latest_only=True))
        self._lock = threading.Lock()
        self._writer = threading.Thread(target=self._write_frames, name="transformer-spec-report", daemon=True)
        self._writer.start()

    def send(self, obj, latest_only: bool = False) -> None:
        """Queue one message (the writer thread writes its frame). ``latest_only``: ``obj`` is a
        whole snapshot that replaces an earlier one still waiting, so a parent that reads slowly
        never makes the queue grow."""
        payload = json.dumps(obj, separators=(",", ":")).encode()
        if latest_only:
            with self._lock:
                self._latest = payload
            self._queue.put(b"")  # the writer takes the newest snapshot when it gets here
        else:
            self._queue.put(payload)

    def _write_frames(self) -> None:
        seq = 0
        while (payload := self._queue.get()) is not None:
            if not payload:
                with self._lock:
                    payload, self._latest = self._latest, None
                if payload is None:
                    continue  # already written by an earlier marker
            view = memoryview(_frame(self._key, seq, payload))
            try:
                while view:
                    view = view[os.write(self._fd, view):]
            except OSError:  # the parent is gone or closed the pipe: nothing to report to
                return
            seq += 1

    def close(self) -> None:
        """Write what is queued, then close the pipe."""
        self._queue.put(None)
        self._writer.join()
        try:
            os.close(self._fd)
        except OSError:
            pass


def open_child_channel(environ=None) -> ChildChannel | None:
    """Read the key, close the key pipe and remove the variable; None when not run by the parent."""
    environ = os.environ if environ is None else environ
    value = environ.pop(ENV_VAR, None)
    if not value:
        return None
    key_fd, report_fd = (int(x) for x in value.split(":"))
    chunks = []
    while True:
        chunk = os.read(key_fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(key_fd)
    data = b"".join(chunks)
    key, extra = data[:KEY_BYTES], json.loads(data[KEY_BYTES:] or b"{}")
    return ChildChannel(key, report_fd, extra)


def make_pipes(key: bytes, extra: dict) -> tuple[int, int, int, str]:
    """Parent side: ``(report_read_fd, key_read_fd, report_write_fd, env value)``.

    The key pipe is filled and its write end closed here, so the child reads it without the
    parent's help (the key and ``extra`` must fit the pipe buffer, 64 KiB on Linux)."""
    key_r, key_w = os.pipe()
    rep_r, rep_w = os.pipe()
    os.write(key_w, key + json.dumps(extra).encode())
    os.close(key_w)
    return rep_r, key_r, rep_w, f"{key_r}:{rep_w}"


# --------------------------------------------------------------------------------------------
# The pytest plugin of the grading child
# --------------------------------------------------------------------------------------------
class _Reporter:
    """Sends each snapshot of the graded run (the grading plugin's own hook) to the parent."""

    def __init__(self, channel: ChildChannel):
        self.channel = channel

    def pytest_transformer_spec_report(self, config, report: dict) -> None:
        self.channel.send(report, latest_only=True)  # each report is a whole snapshot of the run

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config) -> None:
        self.channel.close()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    channel = open_child_channel()
    if channel is not None:
        config.pluginmanager.register(_Reporter(channel), "transformer-spec-reporter")
