"""av_edit_quality bad inputs (its rows of docs/errors.md): undecodable edited video or audio, a source or mask of the
wrong kind, media past the caps, and the prediction folder (files named by sample id, paths that stay inside it,
regular files only); plus the input helpers (to_quality_reference, make_quality_prediction)."""

import os

import numpy as np
import pytest
from helpers.edit_quality import MeanMetric, box_region, clip, reference, rgb_mp4

from perckit.errors import InputNotFoundError, PredictionError
from perckit.io import media as video_caps
from perckit.reason_av_edit import layout
from perckit.reason_av_edit import load_quality_predictions_dir, make_quality_prediction, to_quality_reference
from perckit.reason_av_edit.features import encode_wav
from perckit.reason_av_edit.quality import decode
from perckit.reason_av_edit.quality import metric as core
from perckit.reason_av_edit.quality import predictions as qp
from perckit.reason_av_edit.quality.references import reference_schema

PIXEL = ["ssim", "psnr", "bg_psnr", "bg_ssim"]


@pytest.fixture(scope="module")
def ref():
    return reference("s", clip(t=3, h=16, w=16), box_region(3, 16, 16, (4, 4, 8, 8)))


def run(pred, ref, **options):
    return core.av_edit_quality([pred], [ref], **{"metrics": PIXEL, **options})


# ---------------------------------------------------------------- media that cannot be decoded


def test_undecodable_edited_video_names_the_sample_and_the_file(ref, tmp_path):
    with pytest.raises(PredictionError, match=r"prediction sample 's': edited_video: the video '<bytes>' cannot be decoded \(expected an mp4"):
        run(make_quality_prediction("s", b"not a video at all"), ref)
    bad = tmp_path / "s.mp4"
    bad.write_bytes(ref["video"]["bytes"][:200])  # truncated inside the header
    with pytest.raises(PredictionError, match=rf"prediction sample 's': edited_video: the video '{bad}' (cannot be decoded|has no)"):
        run(make_quality_prediction("s", str(bad)), ref)
    with pytest.raises(InputNotFoundError, match=r"prediction sample 's': edited_video: file '.*absent.mp4' not found"):
        run(make_quality_prediction("s", str(tmp_path / "absent.mp4")), ref)


def test_a_file_without_a_video_stream(ref):
    wav = encode_wav(np.zeros(1600), 16000)
    with pytest.raises(PredictionError, match=r"prediction sample 's': edited_video: the video '<bytes>' (has no video stream|cannot be decoded)"):
        run(make_quality_prediction("s", wav), ref)


def test_undecodable_edited_audio_names_the_sample(ref):
    pred = make_quality_prediction("s", ref["video"]["bytes"], b"RIFF....not a wav")
    # decoded only when an audio metric runs; then refused with the sample and the field
    assert run(pred, ref)["ssim"] == 1.0
    with pytest.raises(PredictionError, match=r"prediction sample 's': edited_audio \(<bytes>\): expected a decodable WAV file"):
        core.av_edit_quality([pred], [ref], metrics=["pq"], models={"pq": MeanMetric()})


def test_a_source_without_video_or_a_mask_of_another_size(ref):
    with pytest.raises(PredictionError, match=r"reference sample 's': video: not provided"):
        run(make_quality_prediction("s", ref["video"]["bytes"]), dict(ref, video={"bytes": None, "path": ""}))
    other = reference("s", clip(t=3, h=16, w=16), box_region(3, 16, 32, (4, 4, 8, 8)))
    with pytest.raises(PredictionError, match=r"reference sample 's': mask_video: the mask video '<bytes>' has frames of 32 x 16, the source video 16 x 16"):
        run(make_quality_prediction("s", other["video"]["bytes"]), other)


def test_undecodable_reference_image(ref):
    bad = dict(ref, ref_image={"bytes": b"not an image", "path": ""})
    with pytest.raises(PredictionError, match=r"reference sample 's': ref_image: the image '<bytes>' cannot be decoded"):
        run(make_quality_prediction("s", ref["video"]["bytes"]), bad)


# ---------------------------------------------------------------- caps


def test_media_past_the_caps(ref, tmp_path, monkeypatch):
    video = ref["video"]["bytes"]
    monkeypatch.setattr(video_caps, "MAX_VIDEO_FRAMES", 2)
    with pytest.raises(PredictionError, match=r"edited_video: the video '<bytes>' (declares 3 frames|has more than 2 frames), more than the limit|has more than 2 frames"):
        run(make_quality_prediction("s", video), ref)
    monkeypatch.undo()
    monkeypatch.setattr(video_caps, "MAX_VIDEO_PIXELS", 100)
    with pytest.raises(PredictionError, match=r"declares 16 x 16 frames, more than the limit of 100 pixels"):
        run(make_quality_prediction("s", video), ref)
    monkeypatch.undo()
    monkeypatch.setattr(decode, "MAX_DECODED_BYTES", 16 * 16 * 3 * 2)
    with pytest.raises(PredictionError, match=r"decodes to more than 1536 bytes of RGB frames"):
        run(make_quality_prediction("s", video), ref)
    monkeypatch.undo()
    # a path over the file cap: refused before reading, by the metric and by the folder loader
    (tmp_path / "s.mp4").write_bytes(video)
    monkeypatch.setattr(layout, "MAX_MEDIA_FILE_BYTES", 100)
    with pytest.raises(PredictionError, match=r"holds \d+ bytes, more than the limit of 100"):
        run(make_quality_prediction("s", str(tmp_path / "s.mp4")), ref)
    monkeypatch.setattr(qp, "MAX_MEDIA_FILE_BYTES", 100)
    with pytest.raises(PredictionError, match=r"holds \d+ bytes, more than the limit of 100"):
        load_quality_predictions_dir(tmp_path)


# ---------------------------------------------------------------- the prediction folder


def test_prediction_folder(ref, tmp_path):
    video = ref["video"]["bytes"]
    (tmp_path / "a.mp4").write_bytes(video)
    (tmp_path / "b.mp4").write_bytes(video)
    (tmp_path / "b.wav").write_bytes(encode_wav(np.zeros(1600), 16000))
    (tmp_path / "notes").mkdir()
    rows = load_quality_predictions_dir(tmp_path)
    assert [r["sample_id"] for r in rows] == ["a", "b"]
    assert rows[0]["edited_audio"] == {"bytes": None, "path": ""} and rows[0]["edited_video"] == {"bytes": None, "path": str(tmp_path / "a.mp4")}
    assert rows[1]["edited_audio"]["path"] == str(tmp_path / "b.wav")
    # given ids: the ones without an <id>.mp4 are left out (the metric then reports them missing)
    assert [r["sample_id"] for r in load_quality_predictions_dir(tmp_path, ["b", "c"])] == ["b"]
    out = core.av_edit_quality(load_quality_predictions_dir(tmp_path, ["a"]), [dict(ref, sample_id="a")], metrics=PIXEL)
    assert out["ssim"] == 1.0
    (tmp_path / "d.wav").write_bytes(b"")
    with pytest.raises(PredictionError, match=r"'.*d\.wav': no d\.mp4 beside it; a prediction needs the edited video"):
        load_quality_predictions_dir(tmp_path)
    with pytest.raises(InputNotFoundError, match=r"predictions folder '.*nope' does not exist"):
        load_quality_predictions_dir(tmp_path / "nope")
    with pytest.raises(PredictionError, match=r"sample id: expected a sample id usable as a file name"):
        load_quality_predictions_dir(tmp_path, ["../a"])


def test_prediction_path_leaving_the_folder_is_refused(ref, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.mp4").write_bytes(ref["video"]["bytes"])
    root = tmp_path / "preds"
    root.mkdir()
    os.symlink(outside / "x.mp4", root / "x.mp4")
    with pytest.raises(PredictionError, match=r"expected a path inside the release root .*a symbolic link leaves the root"):
        load_quality_predictions_dir(root)


def test_prediction_folder_refuses_a_fifo(tmp_path):
    os.mkfifo(tmp_path / "f.mp4")
    with pytest.raises(PredictionError, match=r"expected a regular file, got a FIFO"):
        load_quality_predictions_dir(tmp_path)


# ---------------------------------------------------------------- the input helpers


def test_make_quality_prediction():
    p = make_quality_prediction("s", b"mp4")
    assert p == {"sample_id": "s", "edited_video": {"bytes": b"mp4", "path": ""}, "edited_audio": {"bytes": None, "path": ""}}
    wav = make_quality_prediction("s", "/x.mp4", np.zeros(160, np.float32))["edited_audio"]
    assert wav["bytes"][:4] == b"RIFF" and make_quality_prediction("s", {"bytes": None, "path": "/x.mp4"})["edited_video"]["path"] == "/x.mp4"
    with pytest.raises(PredictionError, match=r"prediction 's': edited_video is required"):
        make_quality_prediction("s", None)
    with pytest.raises(PredictionError, match=r"sample_id must be a non-empty str"):
        make_quality_prediction("", b"x")
    with pytest.raises(PredictionError, match=r"prediction 's': edited_audio: expected bytes, a path"):
        make_quality_prediction("s", b"x", 5)


def test_to_quality_reference():
    from PIL import Image

    row = {k: None for k in reference_schema()}
    row.update(sample_id="s", category="combined", sub_track="C4_spatial_add", instruction="Add a dog.", video={"bytes": b"v", "path": ""},
               edit_window_s=[], fps=25.0, num_frames=17, ref_image=Image.new("RGB", (4, 2), (10, 20, 30)), extra="ignored")
    r = to_quality_reference(row)
    assert set(r) == set(reference_schema()) and r["edit_window_s"] is None
    assert r["audio"] == {"bytes": None, "path": ""} and r["mask_video"] == {"bytes": None, "path": ""}
    img = decode.reference_image(r["ref_image"], "x")
    assert img.shape == (2, 4, 3) and (img == (10, 20, 30)).all()
    assert to_quality_reference(dict(row, ref_image={"bytes": b"jpg", "path": "r.jpg"}))["ref_image"] == {"bytes": b"jpg", "path": "r.jpg"}
    with pytest.raises(PredictionError, match=r"row is missing the key\(s\) \['instruction'\]"):
        to_quality_reference({k: v for k, v in row.items() if k != "instruction"})


def test_audio_from_the_video_track_when_no_wav(ref):
    tone = 0.3 * np.sin(2 * np.pi * 440 * np.arange(4800) / 16000)
    with_track = rgb_mp4(clip(t=3, h=16, w=16), audio=tone)
    d = decode.decode_sample(make_quality_prediction("s", with_track), dict(ref, video={"bytes": with_track, "path": ""}))
    assert d.has_edited_audio and d.sample.edited.audio.dtype == np.float32 and d.sample.source.audio is not None
    d = decode.decode_sample(make_quality_prediction("s", ref["video"]["bytes"]), ref)
    assert not d.has_edited_audio and d.sample.edited.audio is None
