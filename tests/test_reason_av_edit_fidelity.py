"""ReasonAVEdit-Bench, issue 14: a ``metadata.csv`` with only the card's documented columns (``id``, ``sub_track``,
``instruction``, ``video``, ``audio``, ``reason_visual``, ``reason_visual_mask``, ``reason_audio``) still gives every
row its mask video and the reference-guided / instance-addition rows their reference image: the members are looked
up by sample id (``masks/<id>.mp4``, ``ref_images/<id>.png|.jpg|.jpeg``) in the tars or the extracted folders, with
one warning per build for the samples that have none. Columns that are there win."""

import io
import logging
import os
import shutil
import tarfile

import datasets
import pytest
from helpers.harness import chain as _chain
from helpers.harness import messages as _messages

from perckit.hf.entrypoints import build_split
from perckit.errors import OptionError, ReleaseFormatError
from perckit.samples import reason_av_edit as fixture
from perckit.reason_av_edit import builder as rav_builder
from perckit.reason_av_edit.layout import MEDIA_FOLDERS
from perckit.reason_av_edit.read.archives import iter_tar_file, iter_tar_members
from perckit.reason_av_edit.read.media import lookup_candidates
from perckit.reason_av_edit.read.metadata import DOCUMENTED_COLUMNS

NAME, CONFIG = "reason_av_edit", "default"
SUBS = ("W1", "H3", "T1", "C4", "R1", "R3")
IDS = ["w1_0000", "h3_0000", "t1_0000", "c4_0000", "r1_0000", "r3_0000"]
WITH_REF = ["c4_0000", "r1_0000", "r3_0000"]
LOOKUP_WARNING = "looked up by sample id"


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    from perckit.samples import write_release

    return write_release(NAME, tmp_path_factory.mktemp("rae_full"), sub_tracks=SUBS, extracted=True)


@pytest.fixture(scope="module")
def documented(tmp_path_factory):
    from perckit.samples import write_release

    return write_release(NAME, tmp_path_factory.mktemp("rae_doc"), sub_tracks=SUBS, extracted=True, columns="documented")


@pytest.fixture(scope="module")
def full_rows(full, tmp_path_factory):
    return _sorted(_raw(build_split(NAME, CONFIG, full.root, tmp_path_factory.mktemp("c_full"), source="archives")))


def _raw(ds):
    for c in ("reason_visual", "reason_visual_mask", "ref_image"):
        ds = ds.cast_column(c, datasets.Image(decode=False))
    return list(ds)


def _sorted(rows):
    return sorted(rows, key=lambda r: r["sample_id"])


def _without_csv_only_fields(rows):
    """The rows without the fields only the full CSV carries (language, orientation: not documented columns)."""
    return [{k: v for k, v in r.items() if k not in ("language", "orientation")} for r in rows]


def _lookup_warnings(caplog):
    return [r for r in caplog.records if r.levelno == logging.WARNING and LOOKUP_WARNING in r.getMessage()]


def _byte_offset(a, b):
    """The first offset where two byte strings differ (the shorter one's length when one is a prefix)."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _first_difference(root_a, root_b, files):
    """``None`` when every file of ``files`` has the same bytes under both roots, else where the first difference is:
    the file, for a tar its first differing member (name, header or data), and the byte offset with the sizes."""
    for f in files:
        a, b = (root_a / f).read_bytes(), (root_b / f).read_bytes()
        if a == b:
            continue
        where = f"{f}: byte {_byte_offset(a, b)} (sizes {len(a)}, {len(b)})"
        if f.endswith(".tar"):
            with tarfile.open(fileobj=io.BytesIO(a)) as ta, tarfile.open(fileobj=io.BytesIO(b)) as tb:
                ma, mb = ta.getmembers(), tb.getmembers()
                for x, y in zip(ma, mb):
                    if x.name != y.name or x.get_info() != y.get_info():
                        return f"{where}; member header {x.name} != {y.name}: {x.get_info()} != {y.get_info()}"
                    da, db = ta.extractfile(x).read(), tb.extractfile(y).read()
                    if da != db:
                        return f"{where}; member {x.name}: byte {_byte_offset(da, db)} (sizes {len(da)}, {len(db)})"
                if len(ma) != len(mb):
                    return f"{where}; members {[m.name for m in ma]} != {[m.name for m in mb]}"
        return where
    return None


def _first_row_difference(rows_a, rows_b):
    """``None`` when the rows are equal, else the first differing row and field (for bytes, the byte offset)."""
    if len(rows_a) != len(rows_b):
        return f"{len(rows_a)} rows != {len(rows_b)}"
    for ra, rb in zip(rows_a, rows_b):
        for k in sorted(set(ra) | set(rb)):
            va, vb = ra.get(k), rb.get(k)
            if va == vb:
                continue
            if isinstance(va, dict) and isinstance(vb, dict) and isinstance(va.get("bytes"), bytes) and isinstance(vb.get("bytes"), bytes):
                return (f"{ra.get('sample_id')}.{k} ({va.get('path')}, {vb.get('path')}): byte "
                        f"{_byte_offset(va['bytes'], vb['bytes'])} (sizes {len(va['bytes'])}, {len(vb['bytes'])})")
            return f"{ra.get('sample_id')}.{k}: {va!r:.200} != {vb!r:.200}"
    return None


def _copy(release, dest, extracted=False):
    """The Hub files of a release (metadata.csv, annotations/, archives/), and with ``extracted`` the media folders."""
    dest.mkdir(parents=True)
    shutil.copy(release.root / "metadata.csv", dest / "metadata.csv")
    shutil.copytree(release.root / "annotations", dest / "annotations")
    shutil.copytree(release.root / "archives", dest / "archives")
    if extracted:
        for folder in MEDIA_FOLDERS:
            shutil.copytree(release.root / folder, dest / folder)
    return dest


def _rewrite_tar(path, keep=lambda name: True, add=()):
    members = []
    with tarfile.open(path) as tar:
        for m in tar.getmembers():
            if keep(m.name):
                members.append((m.name, tar.extractfile(m).read()))
    with tarfile.open(path, "w") as tar:
        for name, data in list(members) + list(add):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _rewrite_csv(path, edit):
    import csv

    rows = list(csv.reader(path.read_text(encoding="utf-8").splitlines()))
    header, body = edit(rows[0], rows[1:])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(body)
    path.write_text(buf.getvalue(), encoding="utf-8")


# ---------------------------------------------------------------- the fixture variant


def test_documented_fixture_has_only_the_documented_columns_and_the_same_files(documented, full):
    header = (documented.root / "metadata.csv").read_text(encoding="utf-8").splitlines()[0].split(",")
    assert tuple(header) == fixture.DOCUMENTED_HEADER
    assert set(header) == set(DOCUMENTED_COLUMNS) | {"id"}
    assert documented.files == full.files and documented.sample_ids == IDS and sorted(documented.ref_image) == WITH_REF
    assert _first_difference(documented.root, full.root, [f for f in full.files if f != "metadata.csv"]) is None
    with pytest.raises(ValueError, match="columns: expected one of"):
        fixture.write_release(documented.root.parent / "bad", columns="some")


# ---------------------------------------------------------------- the lookup finds the members


@pytest.mark.parametrize("source", ["archives", "extracted"])
def test_lookup_fills_mask_video_and_ref_image(documented, full_rows, tmp_path, caplog, source):
    with caplog.at_level(logging.WARNING):
        rows = _sorted(_raw(build_split(NAME, CONFIG, documented.root, tmp_path / "c", source=source)))
    assert [r["sample_id"] for r in rows] == sorted(IDS)
    for r in rows:
        sid = r["sample_id"]
        assert r["mask_video"] == {"bytes": (documented.root / f"masks/{sid}.mp4").read_bytes(), "path": f"masks/{sid}.mp4"}
        if sid in WITH_REF:
            assert r["ref_image"] == {"bytes": (documented.root / f"ref_images/{sid}.jpg").read_bytes(), "path": f"ref_images/{sid}.jpg"}
        else:
            assert r["ref_image"] is None
        assert r["language"] is None and r["orientation"] is None  # not documented columns
    # every other field equals the build from the CSV that names the members in its own columns
    got, want = _without_csv_only_fields(rows), _without_csv_only_fields(full_rows)
    assert _first_row_difference(got, want) is None
    assert got == want
    assert _lookup_warnings(caplog) == []  # every expected member was found


def test_lookup_gives_the_same_rows_in_streaming(documented, tmp_path):
    from perckit.hf.entrypoints import builder_class

    built = {}
    for source in ("archives", "extracted"):
        built[source] = _sorted(list(build_split(NAME, CONFIG, documented.root, tmp_path / source, source=source)))
        b = builder_class(NAME)(config_name=CONFIG, data_dir=str(documented.root), source=source)
        streamed = _sorted(list(b.as_streaming_dataset("test")))
        assert streamed == built[source], source
        assert all(r["mask_video"] is not None for r in streamed)
        assert [r["sample_id"] for r in streamed if r["ref_image"] is not None] == WITH_REF
    assert built["archives"] == built["extracted"]


@pytest.mark.parametrize("ext", [".png", ".jpeg"])
def test_each_documented_image_extension_is_found(documented, tmp_path, ext):
    root = _copy(documented, tmp_path / "rel", extracted=True)
    os.rename(root / "ref_images/r1_0000.jpg", root / f"ref_images/r1_0000{ext}")
    rows = {r["sample_id"]: r for r in _raw(build_split(NAME, CONFIG, root, tmp_path / "c", source="extracted"))}
    assert rows["r1_0000"]["ref_image"]["path"] == f"ref_images/r1_0000{ext}"


def test_archive_mode_looks_on_disk_when_a_member_is_in_no_tar(documented, tmp_path):
    root = _copy(documented, tmp_path / "rel")
    _rewrite_tar(root / "archives/ref_images.tar", keep=lambda n: n != "ref_images/r3_0000.jpg")
    (root / "ref_images").mkdir()
    shutil.copy(documented.root / "ref_images/r3_0000.jpg", root / "ref_images/r3_0000.jpg")
    rows = {r["sample_id"]: r for r in _raw(build_split(NAME, CONFIG, root, tmp_path / "c", source="archives"))}
    assert rows["r3_0000"]["ref_image"] == {"bytes": (root / "ref_images/r3_0000.jpg").read_bytes(), "path": "ref_images/r3_0000.jpg"}


# ---------------------------------------------------------------- samples with none: one warning per build


def test_one_warning_lists_the_samples_without_a_member(documented, tmp_path, caplog):
    root = _copy(documented, tmp_path / "rel")
    _rewrite_tar(root / "archives/masks.tar", keep=lambda n: n not in ("masks/h3_0000.mp4", "masks/t1_0000.mp4"))
    _rewrite_tar(root / "archives/ref_images.tar", keep=lambda n: n != "ref_images/r1_0000.jpg")
    with caplog.at_level(logging.WARNING):
        rows = {r["sample_id"]: r for r in build_split(NAME, CONFIG, root, tmp_path / "c")}
    warnings = _lookup_warnings(caplog)
    assert len(warnings) == 1, [w.getMessage() for w in warnings]
    text = warnings[0].getMessage()
    assert "mask_video: 2 of 6 samples have no masks/<id>.mp4 ('h3_0000', 't1_0000')" in text
    assert "ref_image: 1 of 3 samples of the tracks expected to have one (R, C4) have no ref_images/<id>.png|.jpg|.jpeg ('r1_0000')" in text
    assert rows["h3_0000"]["mask_video"] is None and rows["t1_0000"]["mask_video"] is None
    assert rows["w1_0000"]["mask_video"] is not None
    assert rows["r1_0000"]["ref_image"] is None and rows["r3_0000"]["ref_image"] is not None


def test_the_warning_names_a_few_ids_not_every_one(documented, tmp_path, caplog):
    root = _copy(documented, tmp_path / "rel", extracted=True)
    shutil.rmtree(root / "masks")
    with caplog.at_level(logging.WARNING):
        rows = build_split(NAME, CONFIG, root, tmp_path / "c", source="extracted")
    warnings = _lookup_warnings(caplog)
    assert len(warnings) == 1
    text = warnings[0].getMessage()
    assert "mask_video: 6 of 6 samples have no masks/<id>.mp4 ('w1_0000', 'h3_0000', 't1_0000', 'c4_0000', 'r1_0000', ...)" in text
    assert "r3_0000" not in text and "ref_image:" not in text  # every expected reference image was found
    assert all(r["mask_video"] is None for r in rows)


# ---------------------------------------------------------------- the CSV's own columns win


def test_csv_columns_win_and_the_lookup_is_not_used(full, tmp_path, caplog):
    root = _copy(full, tmp_path / "rel")

    def edit(header, body):
        m, r = header.index("mask"), header.index("ref_image")
        for row in body:
            if row[0] == "w1_0000":
                row[m] = "masks/h3_0000.mp4"  # another existing member: the column is taken as written
            if row[0] == "c4_0000":
                row[r] = ""  # an empty cell means none, even though ref_images/c4_0000.jpg exists
        return header, body

    _rewrite_csv(root / "metadata.csv", edit)
    with caplog.at_level(logging.WARNING):
        rows = {r["sample_id"]: r for r in _raw(build_split(NAME, CONFIG, root, tmp_path / "c"))}
    assert rows["w1_0000"]["mask_video"]["path"] == "masks/h3_0000.mp4"
    assert rows["c4_0000"]["ref_image"] is None and rows["r1_0000"]["ref_image"]["path"] == "ref_images/r1_0000.jpg"
    assert _lookup_warnings(caplog) == []


def test_only_the_missing_column_is_looked_up(full, tmp_path, caplog):
    root = _copy(full, tmp_path / "rel")

    def edit(header, body):
        m, r = header.index("mask"), header.index("ref_image")
        for row in body:
            if row[0] == "w1_0000":
                row[m] = "masks/h3_0000.mp4"
        keep = [i for i in range(len(header)) if i != r]
        return [header[i] for i in keep], [[row[i] for i in keep] for row in body]

    _rewrite_csv(root / "metadata.csv", edit)
    rows = {r["sample_id"]: r for r in _raw(build_split(NAME, CONFIG, root, tmp_path / "c"))}
    assert rows["w1_0000"]["mask_video"]["path"] == "masks/h3_0000.mp4"  # from the column
    assert [s for s, r in sorted(rows.items()) if r["ref_image"] is not None] == WITH_REF  # looked up
    assert rows["r1_0000"]["ref_image"]["path"] == "ref_images/r1_0000.jpg"


def test_media_lookup_option(documented, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        rows = list(build_split(NAME, CONFIG, documented.root, tmp_path / "c", media_lookup=False))
    assert all(r["mask_video"] is None and r["ref_image"] is None for r in rows) and len(rows) == 6
    assert _lookup_warnings(caplog) == []
    with pytest.raises(OptionError, match=r"option 'media_lookup': expected True or False, got 'yes'"):
        build_split(NAME, CONFIG, documented.root, tmp_path / "c2", media_lookup="yes")


# ---------------------------------------------------------------- only wanted members, under the issue-13 guards


def test_the_lookup_reads_only_the_members_it_names(documented, tmp_path, monkeypatch):
    root = _copy(documented, tmp_path / "rel")
    _rewrite_tar(root / "archives/masks.tar", add=[("masks/zz_unreferenced.mp4", b"x" * 100)])
    _rewrite_tar(root / "archives/ref_images.tar", add=[("ref_images/w1_0000.gif", b"GIF89a")])
    seen: dict[str, tuple] = {}
    real_file, real_members = iter_tar_file, iter_tar_members

    def spy(real):
        def reader(path_or_members, label, wanted=None, skipped=None):
            got = []
            seen[label] = (wanted, got)
            for name, data in real(path_or_members, label, wanted, skipped):
                got.append(name)
                yield name, data
        return reader

    monkeypatch.setattr(rav_builder, "iter_tar_file", spy(real_file))
    monkeypatch.setattr(rav_builder, "iter_tar_members", spy(real_members))
    from perckit.hf.entrypoints import builder_class

    expected = {f"masks/{s}.mp4" for s in IDS} | {f"ref_images/{s}{e}" for s in IDS for e in (".png", ".jpg", ".jpeg")}
    for run in ("arrow", "streaming"):
        seen.clear()
        if run == "arrow":
            rows = list(build_split(NAME, CONFIG, root, tmp_path / "c", source="archives"))
        else:
            rows = list(builder_class(NAME)(config_name=CONFIG, data_dir=str(root), source="archives").as_streaming_dataset("test"))
        assert len(rows) == 6 and all(r["mask_video"] is not None for r in rows)
        wanted, got = seen["archives/masks.tar"]
        assert expected <= set(wanted) and "masks/zz_unreferenced.mp4" not in wanted, run
        assert got == [f"masks/{s}.mp4" for s in IDS], run
        wanted, got = seen["archives/ref_images.tar"]
        assert "ref_images/w1_0000.gif" not in wanted and sorted(got) == [f"ref_images/{s}.jpg" for s in WITH_REF], run


def test_lookup_candidates_go_through_check_relative():
    assert lookup_candidates("r1_0000", "ref_image") == ["ref_images/r1_0000.png", "ref_images/r1_0000.jpg", "ref_images/r1_0000.jpeg"]
    assert lookup_candidates("w1_0000", "mask_video") == ["masks/w1_0000.mp4"]
    with pytest.raises(ReleaseFormatError, match=r"sample 'x\\x00'.*'mask_video' member looked up by sample id: expected a relative path, got one with a NUL byte"):
        lookup_candidates("x\x00", "mask_video")


def test_a_looked_up_member_linking_out_of_the_release_is_refused(documented, tmp_path):
    root = _copy(documented, tmp_path / "rel", extracted=True)
    outside = tmp_path / "secret.mp4"
    outside.write_bytes(b"not yours")
    (root / "masks/w1_0000.mp4").unlink()
    (root / "masks/w1_0000.mp4").symlink_to(outside)
    for source in ("extracted", "archives"):  # archive mode: the member is in the tar, so the disk is not looked at
        if source == "archives":
            rows = {r["sample_id"]: r for r in build_split(NAME, CONFIG, root, tmp_path / "c_a", source=source)}
            assert rows["w1_0000"]["mask_video"]["bytes"] != b"not yours"
            continue
        with pytest.raises(Exception) as info:
            build_split(NAME, CONFIG, root, tmp_path / "c_e", source=source)
        msgs = _messages(info.value)
        assert any("masks/w1_0000.mp4" in m and "no column for 'mask_video', looked up by sample id" in m
                   and "a symbolic link leaves the root" in m for m in msgs), msgs


def test_a_looked_up_member_that_is_a_fifo_is_refused(documented, tmp_path):
    root = _copy(documented, tmp_path / "rel", extracted=True)
    (root / "ref_images/r1_0000.jpg").unlink()
    os.mkfifo(root / "ref_images/r1_0000.jpg")
    with pytest.raises(Exception) as info:
        build_split(NAME, CONFIG, root, tmp_path / "c", source="extracted")
    msgs = _messages(info.value)
    assert any("ref_images/r1_0000.jpg" in m and "FIFO" in m for m in msgs), msgs


@pytest.mark.parametrize("source", ["archives", "extracted"])
def test_two_candidates_for_one_sample_are_refused(documented, tmp_path, source):
    root = _copy(documented, tmp_path / "rel", extracted=source == "extracted")
    png = (documented.root / "ref_images/r1_0000.jpg").read_bytes()
    if source == "extracted":
        (root / "ref_images/r1_0000.png").write_bytes(png)
    else:
        _rewrite_tar(root / "archives/ref_images.tar", add=[("ref_images/r1_0000.png", png)])
    with pytest.raises(Exception) as info:
        build_split(NAME, CONFIG, root, tmp_path / "c", source=source)
    msgs = _messages(info.value)
    assert any("sample 'r1_0000'" in m and "found 2 members ['ref_images/r1_0000.png', 'ref_images/r1_0000.jpg']" in m
               and "expected at most one" in m for m in msgs), msgs
    assert any(isinstance(e, ReleaseFormatError) for e in _chain(info.value))


