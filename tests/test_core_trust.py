"""The shared guards of issue 13 (docs/errors.md, "Security"): the path guard, the capped regular-file reader,
the JSON rules (duplicate keys, the BOM), the one check of encoded images and the one rule for mask PNGs."""

from __future__ import annotations

import io
import os
import string

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from perckit.errors import PredictionError, ReleaseFormatError, ReleaseNotFoundError
from perckit.io.images import check_encoded_image, mask_foreground
from perckit.io.jsonio import DuplicateKeyError, decode_text, loads, read_json
from perckit.io.paths import MAX_PATH_CHARS, check_relative, read_regular_file, resolve_under


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "release"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("outside")
    os.symlink(tmp_path / "secret.txt", root / "sub" / "link_out")
    os.symlink("f.txt", root / "sub" / "link_in")
    os.symlink(tmp_path, root / "dir_out")
    return root


@pytest.mark.parametrize("rel", ["sub/f.txt", "./sub/f.txt", "sub//f.txt", "sub/link_in", "sub/missing.txt"])
def test_paths_inside_the_root_are_accepted(tree, rel):
    path = resolve_under(tree, rel, "x.json row 0: 'file_name'")
    assert path == tree / rel.replace("./", "").replace("//", "/")


@pytest.mark.parametrize(
    "rel, says",
    [
        ("/etc/passwd", "absolute path"),
        ("\\\\server\\share", "absolute path"),
        ("C:/Windows/win.ini", "absolute path"),
        ("c:x", "absolute path"),
        ("../secret.txt", "'..' component"),
        ("sub/../../secret.txt", "'..' component"),
        ("sub\\..\\..\\secret.txt", "'..' component"),
        ("sub/link_out", "symbolic link leaves the root"),
        ("dir_out/secret.txt", "symbolic link leaves the root"),
        ("", "relative path string"),
        ("a\x00b", "NUL byte"),
        ("a" * (MAX_PATH_CHARS + 1), f"at most {MAX_PATH_CHARS} characters"),
    ],
)
def test_paths_leaving_the_root_are_refused_naming_the_field(tree, rel, says):
    with pytest.raises(ReleaseFormatError, match="x.json row 0: 'file_name'") as e:
        resolve_under(tree, rel, "x.json row 0: 'file_name'")
    assert says in str(e.value)


@pytest.mark.parametrize("value", [None, 5, ["a"], b"sub/f.txt"])
def test_non_string_paths_are_refused(tree, value):
    with pytest.raises(PredictionError, match="expected a relative path string"):
        resolve_under(tree, value, "p", error=PredictionError)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["..", ".", "a", "b", "", "\\", "..\\"]), min_size=1, max_size=6))
def test_lexical_check_never_lets_a_path_climb_out(parts):
    """Whatever survives check_relative has no component that climbs out of the root."""
    rel = "/".join(parts)
    try:
        pure = check_relative(rel, "w")
    except ReleaseFormatError:
        return
    depth = 0
    for p in pure.parts:
        depth += -1 if p == ".." else 1
        assert depth >= 0


def test_read_regular_file_reads_under_the_cap(tree):
    assert read_regular_file(tree / "sub" / "f.txt", "w", limit=6) == b"inside"
    with pytest.raises(ReleaseFormatError, match="holds 6 bytes, more than the limit of 5"):
        read_regular_file(tree / "sub" / "f.txt", "w", limit=5)


def test_read_regular_file_reads_on_after_short_reads_and_a_grown_file(tree, monkeypatch):
    """A read that comes back short is not taken for the end of the file, and a file that grew after its size
    was taken is read on, up to the cap: the bytes are those of the file, or the cap's error."""
    path = tree / "sub" / "big.bin"
    data = bytes(range(256)) * 40  # 10,240 bytes
    path.write_bytes(data)
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: real_read(fd, min(n, 1000)))  # at most 1,000 bytes a call
    assert read_regular_file(path, "w", limit=len(data)) == data
    with pytest.raises(ReleaseFormatError, match="more than the limit of 10239 bytes"):
        read_regular_file(path, "w", limit=len(data) - 1)
    monkeypatch.undo()
    real_fstat = os.fstat

    def stale_fstat(fd):  # the size fstat gave is that of an older, shorter file
        st = real_fstat(fd)
        return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid, 100, *st[7:]))

    monkeypatch.setattr(os, "fstat", stale_fstat)
    assert read_regular_file(path, "w", limit=len(data)) == data
    with pytest.raises(ReleaseFormatError, match="holds more than the limit of 5000 bytes"):
        read_regular_file(path, "w", limit=5000)
    (tree / "sub" / "empty").write_bytes(b"")
    monkeypatch.undo()
    assert read_regular_file(tree / "sub" / "empty", "w", limit=0) == b""


def test_read_regular_file_refuses_what_is_not_a_regular_file(tree):
    fifo = tree / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ReleaseFormatError, match="expected a regular file, got a FIFO"):
        read_regular_file(fifo, "w", limit=10)  # would block forever if opened for a plain read
    with pytest.raises(ReleaseFormatError, match="expected a regular file, got a device"):
        read_regular_file("/dev/zero", "w", limit=10)  # would never end
    with pytest.raises(ReleaseFormatError, match="expected a regular file, got a folder"):
        read_regular_file(tree / "sub", "w", limit=10)
    with pytest.raises(ReleaseNotFoundError, match="not found"):
        read_regular_file(tree / "nope", "w", limit=10)
    with pytest.raises(PredictionError, match="not found"):
        read_regular_file(tree / "nope", "w", limit=10, error=PredictionError)


def test_duplicate_keys_are_refused_at_any_depth(tmp_path):
    with pytest.raises(DuplicateKeyError, match="duplicate key 'c'"):
        loads('{"a": 1, "b": [{"c": 1, "c": 2}]}')
    p = tmp_path / "gt.json"
    p.write_text('{"q1": {"frames": []}, "q1": {"frames": [1]}}')
    with pytest.raises(ReleaseFormatError, match=r"gt.json'.*duplicate key 'q1'"):
        read_json(p, limit=1 << 20)
    assert loads('{"a": {"b": 1}, "b": {"a": 2}}') == {"a": {"b": 1}, "b": {"a": 2}}


def test_bom_rule_is_the_same_for_bytes_text_and_files(tmp_path):
    assert loads(b"\xef\xbb\xbf{\"a\": 1}") == {"a": 1}
    assert loads("\ufeff{\"a\": 1}") == {"a": 1}
    p = tmp_path / "bom.json"
    p.write_bytes(b"\xef\xbb\xbf[1, 2]")
    assert read_json(p, limit=1 << 20) == [1, 2]
    assert decode_text(b"\xef\xbb\xbfid,x\n", "m.csv") == "id,x\n"
    assert decode_text("id,\ufeffx".encode(), "m.csv") == "id,\ufeffx"  # only a leading BOM is skipped
    with pytest.raises(ReleaseFormatError, match="m.csv: expected UTF-8 text, got undecodable bytes"):
        decode_text(b"\xff\xfe", "m.csv")


def _encoded(fmt: str, h: int, w: int, mode: str = "RGB", **kw) -> bytes:
    arr = np.random.default_rng(h * 100 + w).integers(0, 256, (h, w, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr, "RGB").convert(mode).save(buf, format=fmt, **kw)
    return buf.getvalue()


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    import zlib

    return len(body).to_bytes(4, "big") + kind + body + zlib.crc32(kind + body).to_bytes(4, "big")


def test_check_encoded_image_reads_the_header_with_pillow():
    """``(H, W)`` of a JPEG, a PNG and an MPO (a JPEG with two pictures); refused, naming ``where``: a cut
    JPEG / MPO / PNG (no end marker), headers Pillow cannot read although their size field is intact (a PNG
    palette with a bad CRC, a JPEG quantisation table shorter than its precision needs: both passed the header
    walker that stood beside Pillow until issue 29), a decompression bomb declared in the header, and bytes of
    no image format."""
    jpeg, png = _encoded("JPEG", 50, 70), _encoded("PNG", 4, 3, mode="P")
    second = Image.fromarray(np.random.default_rng(0).integers(0, 256, (60, 90, 3), dtype=np.uint8))
    buf = io.BytesIO()
    Image.fromarray(np.full((60, 90, 3), 200, np.uint8)).save(buf, format="MPO", save_all=True, append_images=[second])
    mpo = buf.getvalue()
    with Image.open(io.BytesIO(mpo)) as im:
        assert im.format == "MPO"
    assert check_encoded_image(jpeg, "f.jpg") == (50, 70)
    assert check_encoded_image(png, "f.png") == (4, 3)
    assert check_encoded_image(mpo, "f.mpo") == (60, 90)
    assert check_encoded_image(jpeg + b"\x00" * 100, "f.jpg") == (50, 70)  # padding after the end marker
    plte = png.index(b"PLTE")
    bad_palette = png[: plte + 4] + bytes([png[plte + 4] ^ 1]) + png[plte + 5:]  # one palette byte flipped
    dqt = jpeg.index(b"\xff\xdb")
    bad_table = jpeg[: dqt + 4] + bytes([jpeg[dqt + 4] | 0x10]) + jpeg[dqt + 5:]  # a 16-bit table of 64 bytes
    bomb = png[:8] + _png_chunk(b"IHDR", (20000).to_bytes(4, "big") * 2 + bytes([8, 2, 0, 0, 0])) + png[png.index(b"IDAT") - 4:]
    cases = [
        (jpeg[:-10], "f.jpg: expected a complete JPEG, got a truncated one"),
        (mpo[:-10], "f.jpg: expected a complete JPEG, got a truncated one"),
        (png[:-12], "f.jpg: expected a complete PNG, got a truncated one"),
        (bad_palette, "f.jpg: expected a readable image, got: cannot identify image file"),
        (bad_table, "f.jpg: expected a readable image, got: cannot identify image file"),
        (bomb, "f.jpg: expected a readable image, got: .*decompression bomb"),
        (b"GIF8" + b"\x00" * 40, "f.jpg: expected a readable image, got: "),
        (b"not an image", "f.jpg: expected a readable image, got: "),
    ]
    for data, pattern in cases:
        with pytest.raises(ReleaseFormatError, match=pattern):
            check_encoded_image(data, "f.jpg")
    with pytest.raises(PredictionError, match="f.jpg: expected a readable image"):
        check_encoded_image(b"", "f.jpg", PredictionError)


def _png(arr: np.ndarray, mode: str) -> tuple[np.ndarray, str]:
    buf = io.BytesIO()
    Image.fromarray(arr, mode=mode).save(buf, format="PNG")
    with Image.open(io.BytesIO(buf.getvalue())) as im:
        im.load()
        return np.asarray(im), im.mode


def test_mask_rule_counts_every_channel_alpha_included():
    rgba = np.zeros((2, 3, 4), np.uint8)
    rgba[0, 0, 3] = 255  # drawn only in alpha
    rgba[0, 1, :3] = (0, 9, 0)  # colour, opaque or not
    rgba[1, 2] = (0, 0, 0, 0)
    arr, mode = _png(rgba, "RGBA")
    assert mask_foreground(arr, mode).tolist() == [[True, True, False], [False, False, False]]
    assert mask_foreground(arr, mode, threshold=9).tolist() == [[True, False, False], [False, False, False]]
    gray = np.array([[0, 128], [255, 1]], np.uint8)
    arr, mode = _png(gray, "L")
    assert mask_foreground(arr, mode, threshold=127).tolist() == [[False, True], [True, False]]
    im = Image.new("1", (2, 1))
    im.putpixel((0, 0), 1)
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    with Image.open(io.BytesIO(buf.getvalue())) as one:
        one.load()
        assert mask_foreground(np.asarray(one), one.mode, threshold=127).tolist() == [[True, False]]


def test_every_mask_png_reader_uses_the_one_rule(tmp_path):
    """R4D-Bench's mask PNG reader and ReasonAVEdit's anchor-mask reader agree on an RGBA mask."""
    from perckit import rle
    from perckit.r4d_bench.read import png_mask
    from perckit.reason_av_edit.rows import anchor_mask_from_png

    rgba = np.zeros((4, 5, 4), np.uint8)
    rgba[1, 1, 3] = 200
    rgba[2, 3, :] = (10, 0, 0, 255)
    rgba[3, 0, :] = (0, 0, 0, 255)  # opaque black: its alpha is > 0, so foreground (the official R4D-Bench rule)
    buf = io.BytesIO()
    Image.fromarray(rgba, mode="RGBA").save(buf, format="PNG")
    (tmp_path / "m.png").write_bytes(buf.getvalue())
    a = rle.decode(png_mask(tmp_path / "m.png", "r4d"))
    b = rle.decode(anchor_mask_from_png(buf.getvalue(), 0, "rav"))
    expected = np.zeros((4, 5), bool)
    expected[1, 1] = expected[2, 3] = expected[3, 0] = True
    assert (a == expected).all() and (b == expected).all()


def test_charset_of_the_guard_messages_is_printable(tree):
    """Messages quote the path with repr, so control characters in a hostile path cannot forge output lines."""
    with pytest.raises(ReleaseFormatError) as e:
        resolve_under(tree, "/x\n\rerror: fake", "w")
    assert set(str(e.value)) <= set(string.printable) - set("\n\r\x0b\x0c")
