"""One FDB shared by many threads: archive, list and retrieve at once."""

import threading

import fieldstore
from testkeys import BASE_KEY


def test_eight_threads_share_one_handle(fdb, make_fields):
    errors = []
    per_thread = {t: make_fields(steps=(t,), params=("130", "131"), levels=(500, 850))
                  for t in range(8)}
    barrier = threading.Barrier(8)

    def work(t):
        try:
            barrier.wait()
            fields = per_thread[t]
            for _ in range(3):
                fdb.archive(b"".join(d for _, d in fields))
                fdb.flush()
                listed = list(fdb.list(dict(BASE_KEY, step=t)))
                assert len(listed) == 4
                r = fdb.retrieve(dict(BASE_KEY, step=t, param=["130", "131"], levelist=[500, 850]))
                data = r.read()
                assert len(data) == sum(len(d) for _, d in fields)
                assert sorted(f.key["param"] for f in r) == ["130", "130", "131", "131"]
                fdb.axes(dict(BASE_KEY))
        except BaseException as e:  # reported below, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert len(list(fdb.list())) == 32


def test_a_reader_shared_between_threads_hands_out_every_byte_once(store):
    r = store.retrieve(dict(BASE_KEY, param=["130", "131"], levelist=[500, 850], step=[0, 6, 12]))
    size = len(r)
    got = []

    def work():
        while chunk := r.read(97):
            got.append(len(chunk))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sum(got) == size


def test_the_handle_is_a_native_thread_safe_object():
    assert fieldstore.FDB.__module__.startswith("fieldstore")
