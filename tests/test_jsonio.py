"""``perckit.jsonio`` helpers used by the builders."""

import gc

from perckit.jsonio import gc_paused, read_ahead


def test_read_ahead_order_contents_and_errors(tmp_path):
    paths = []
    for i in range(40):
        p = tmp_path / f"{i:02d}.bin"
        p.write_bytes(bytes([i]) * (i * 100))
        paths.append(p)
    paths[5] = tmp_path / "missing.bin"
    paths[7] = tmp_path  # a folder
    got = list(read_ahead(paths, depth=4))
    assert [p for p, _ in got] == paths
    for i, (p, data) in enumerate(got):
        if i == 5:
            assert isinstance(data, FileNotFoundError)
        elif i == 7:
            assert isinstance(data, IsADirectoryError)
        else:
            assert data == bytes([i]) * (i * 100)


def test_gc_paused_restores_state():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off: stays off
    finally:
        gc.enable()


def test_in_background_order_errors_and_early_close():
    import threading

    import pytest

    from perckit.jsonio import in_background

    assert list(in_background(iter(range(100)), depth=3)) == list(range(100))

    def failing():
        yield 1
        yield 2
        raise OSError("disk gone")

    got = []
    with pytest.raises(OSError, match="disk gone"):
        for x in in_background(failing(), depth=1):
            got.append(x)
    assert got == [1, 2]

    closed = threading.Event()

    def endless():
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.set()

    gen = in_background(endless(), depth=2)
    assert [next(gen) for _ in range(5)] == [0, 1, 2, 3, 4]
    gen.close()
    assert closed.wait(5)
    assert not any(t.name == "perckit-read-ahead" and t.is_alive() for t in threading.enumerate())
