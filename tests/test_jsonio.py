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
