"""FDB.subscribe and FDB.retrieve(wait=): fields as flushes make them visible, with a producer
thread sharing a memory store (the engine keeps its commit log in the process)."""

import threading
import time

import pytest

import fieldstore
from testkeys import BASE_KEY, DB_REQUEST


@pytest.fixture
def mem():
    return fieldstore.FDB({"type": "local", "engine": "memory"})


def _producer(fdb, batches, pause=0.05):
    """Archives and flushes each batch in turn, in a thread; returns the thread (started)."""
    errors = []

    def run():
        try:
            for batch in batches:
                time.sleep(pause)
                fdb.archive(b"".join(d for _, d in batch))
                fdb.flush()
        except BaseException as e:  # surfaced by the test through .errors
            errors.append(e)

    t = threading.Thread(target=run)
    t.errors = errors
    t.start()
    return t


def _ident(key):
    return (key["step"], key["param"], key["levelist"])


def test_subscriber_sees_every_flushed_field_once_in_flush_order(mem, make_fields):
    sub = mem.subscribe(DB_REQUEST, start="now", timeout=5)
    batches = [make_fields(steps=(s,)) for s in (0, 6, 12)]
    t = _producer(mem, batches)
    got = []
    for el in sub:
        got.append(el)
        if len(got) == 12:
            break
    t.join()
    assert t.errors == []
    want = [_ident(k) for batch in batches for k, _ in batch]
    # Within a flush the commit's order is the store's; flushes come in the order they were made.
    assert [el.key["step"] for el in got] == [k[0] for k in want]
    assert sorted(_ident(el.key) for el in got) == sorted(want)
    assert all(el.position for el in got)
    assert got[-1].position == sub.position
    # Nothing more came: the next wait ends empty.
    assert sub.next(timeout=0.2) is None


def test_with_data_each_element_carries_its_field(mem, make_fields):
    sub = mem.subscribe(DB_REQUEST, start="now", timeout=5, data=True)
    plain = mem.subscribe(DB_REQUEST, start="now", timeout=5)
    fields = make_fields(steps=(0,))
    for _, d in fields:
        mem.archive(d)
    mem.flush()
    want = {_ident(k): d for k, d in fields}
    got = [sub.next(timeout=5) for _ in fields]
    assert {_ident(el.key): el.data for el in got} == want
    assert plain.next(timeout=5).data is None


def test_a_resumed_subscription_misses_nothing_and_repeats_nothing(mem, make_fields):
    sub = mem.subscribe(DB_REQUEST, start="beginning")
    mem.archive(b"".join(d for _, d in make_fields(steps=(0,))))
    mem.flush()
    first = [sub.next(timeout=5) for _ in range(2)]
    assert all(first)
    saved = first[-1].position
    mem.archive(b"".join(d for _, d in make_fields(steps=(6,))))
    mem.flush()
    rest = list(mem.subscribe(DB_REQUEST, start=saved, timeout=0.5))
    seen = [_ident(el.key) for el in first + rest]
    assert len(seen) == 8 and len(set(seen)) == 8
    # A subscription started now sees none of what is already there.
    assert mem.subscribe(DB_REQUEST, timeout=0.2).next(timeout=0.2) is None


def test_a_bad_start_is_a_bad_request(mem):
    with pytest.raises(fieldstore.BadRequestError, match="not a subscription position"):
        mem.subscribe(DB_REQUEST, start="yesterday")
    with pytest.raises(ValueError):
        mem.subscribe(DB_REQUEST, timeout=-1)


def test_retrieve_with_wait_streams_fields_as_they_are_flushed(mem, make_fields):
    early = make_fields(steps=(0,), params=("130",), levels=(500,))
    late = make_fields(steps=(6,), params=("130",), levels=(500,))
    mem.archive(early[0][1])
    mem.flush()
    request = dict(BASE_KEY, step=[0, 6], param="130", levelist=500)
    r = mem.retrieve(request, wait=10)
    assert isinstance(r, fieldstore.WaitingReader)
    first = next(r)
    assert first.read() == early[0][1]
    assert [m["step"] for m in r.missing] == ["6"]
    t = _producer(mem, [late], pause=0.2)
    started = time.monotonic()
    assert r.read() == late[0][1]
    assert time.monotonic() - started < 5
    assert r.read() == b""
    assert r.missing == []
    t.join()
    assert t.errors == []


def test_retrieve_wait_times_out_naming_the_missing_fields(mem, make_fields):
    (key, data), = make_fields(steps=(0,), params=("130",), levels=(500,))
    mem.archive(data)
    mem.flush()
    r = mem.retrieve(dict(BASE_KEY, step=[0, 12], param="130", levelist=500), wait=0.3)
    assert r.read(len(data)) == data
    with pytest.raises(fieldstore.TimeoutError) as e:
        r.read()
    assert e.value.kind == "timeout"
    assert "step=12" in str(e.value)
    assert isinstance(e.value, TimeoutError)


def test_new_error_kinds_map_to_their_classes():
    from fieldstore.errors import _from_kind

    assert type(_from_kind("timeout", "m")) is fieldstore.TimeoutError
    assert type(_from_kind("fell-behind", "m")) is fieldstore.FellBehindError


# Between processes on a toc store: the producer is another Python process.
PRODUCER = r"""
import json, sys, time
import fieldstore
from fieldstore import _native

config, base, steps, flush = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3].split(","), sys.argv[4]
fdb = fieldstore.FDB(config)
for step in steps:
    for level in ("500", "850"):
        key = dict(base, step=step, levelist=level, param="130")
        fdb.archive(_native.make_field(key, 100, int(step)))
    if flush == "flush":
        fdb.flush()
    print("archived", step, flush=True)
if flush != "flush":
    time.sleep(120)
"""


def _spawn_producer(config, steps, flush=True):
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.Popen(
        [sys.executable, "-c", PRODUCER, json.dumps(config), json.dumps(BASE_KEY),
         ",".join(str(s) for s in steps), "flush" if flush else "hold"],
        env=env, stdout=subprocess.PIPE, text=True,
    )


def test_a_subscriber_follows_another_process_and_never_sees_its_unflushed_fields(fdb, config):
    sub = fdb.subscribe(DB_REQUEST, start="now", timeout=30)
    doomed = _spawn_producer(config, [6], flush=False)
    assert doomed.stdout.readline().split() == ["archived", "6"]
    doomed.kill()  # SIGKILL with its fields archived and not flushed
    doomed.wait()
    producer = _spawn_producer(config, [0, 12])
    got = [next(sub) for _ in range(4)]
    assert producer.wait(timeout=60) == 0
    assert [el.key["step"] for el in got] == ["0", "0", "12", "12"]
    assert sub.next(timeout=0.5) is None
    # From the beginning, later: the same fields, and still not the unflushed ones.
    steps = [el.key["step"] for el in fdb.subscribe(DB_REQUEST, start="beginning", timeout=0.5)]
    assert "6" not in steps
    assert steps.count("0") == 2 and steps.count("12") == 2


def test_retrieve_wait_returns_what_another_process_flushes(fdb, config):
    request = dict(BASE_KEY, step=[0, 6], param="130", levelist=[500, 850])
    r = fdb.retrieve(request, wait=60)
    producer = _spawn_producer(config, [0, 6])
    data = r.read()
    assert producer.wait(timeout=60) == 0
    assert r.missing == []
    plain = fdb.retrieve(request).read()
    assert sorted(data) == sorted(plain) and len(data) == len(plain)
