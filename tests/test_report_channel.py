"""The signed report channel between a grading child and the class grader (``transformer_spec/grader/isolation.py``)."""

from __future__ import annotations

import os
import secrets
import signal
import threading
import time

from transformer_spec.grader import isolation
from transformer_spec.grader.children import ChildRun


def test_a_frame_stays_whole_when_an_alarm_handler_raises_while_it_is_written():
    """A slow parent (the pipe fills up) and a per-test alarm whose handler raises while the child
    reports: every frame arrives whole and in order, the newest snapshot last; nothing looks forged."""
    key = secrets.token_bytes(isolation.KEY_BYTES)
    r, w = os.pipe()
    channel = isolation.ChildChannel(key, w, {})
    reader = isolation.Reader(key)
    got = []

    def drain():
        while True:
            data = os.read(r, 1 << 14)
            if not data:
                break
            got.extend(reader.feed(data))
            time.sleep(0.002)
    t = threading.Thread(target=drain)
    t.start()

    class Stop(Exception):
        pass

    armed = [True]

    def handler(signum, frame):
        if armed[0] and frame is not None and frame.f_code.co_name == "send":
            raise Stop()  # as pytest-timeout's alarm does, in the middle of sending a frame

    old = signal.signal(signal.SIGALRM, handler)
    sent = 0
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.003, 0.003)
        deadline = time.monotonic() + 3
        while True:
            try:
                if time.monotonic() > deadline:
                    break
                channel.send({"kind": "report", "blob": "x" * 300_000, "n": sent}, latest_only=True)
                sent += 1
            except Stop:
                pass
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        channel.close()
        t.join()
    assert reader.forged is None
    numbers = [m["n"] for m in got]
    assert numbers == sorted(numbers) and numbers[-1] == sent - 1, "in order, the newest snapshot last"


def test_the_parent_keeps_only_the_latest_report():
    run = ChildRun()
    run.add([{"kind": "report", "n": 1}, {"kind": "recheck", "name": "a"}])
    run.add([{"kind": "report", "n": 2}, {"kind": "recheck", "name": "b"}])
    assert run.messages == [{"kind": "recheck", "name": "a"}, {"kind": "report", "n": 2},
                            {"kind": "recheck", "name": "b"}]
