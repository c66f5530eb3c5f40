"""ReasonAVEdit edit quality, the embedding metrics: TV-A / TC (CLIP), TA-A (CLAP), AV-A (ImageBind), PQ
(Audiobox Aesthetics).

The cosine math (``quality/formulas.py``) has golden values on hand-made vectors. The model glue runs end to
end on tiny randomly initialised networks of the real architectures, built here (nothing is downloaded; the
test environment's Hugging Face cache is an empty temp folder, so every default factory reports
``ModelUnavailable``):

- CLIP / CLAP: ``transformers.CLIPModel(CLIPConfig(tiny))`` / ``ClapModel(ClapConfig(tiny))`` with byte-level
  BPE tokenizers (``CLIPTokenizer`` / ``RobertaTokenizer``) built from a tiny vocabulary written to a temp
  folder (a-z, no merges: enough to tokenise; the real tokenizers come with the real checkpoints);
- Audiobox Aesthetics: the package's own ``AesMultiOutput`` class, its WavLM configuration
  (``aes.DEFAULT_AUDIO_CFG``, which the class reads when built) swapped for a 2-layer, 32-wide one;
- ImageBind: the ``imagebind`` package is not installable here (not on PyPI), so the glue is tested with a
  small stand-in module that has ImageBind's call API (``model({modality: tensor}) -> {modality: embedding}``,
  the multi-clip inputs averaged the way ``ImageBindModel.forward`` does) and a stand-in ``waveform2melspec``
  with ImageBind's signature (and its in-place mean removal); one test runs on the real package and skips
  with a message when it is absent.
"""

from __future__ import annotations

import json
import math
import sys
from fractions import Fraction

import numpy as np
import pytest

from perckit.errors import InputNotFoundError, OptionError
from perckit.reason_av_edit.quality import formulas as sim
from perckit.reason_av_edit.quality.models import BY_KEY, Clip, ModelOptions, ModelUnavailable, QualitySample
from perckit.reason_av_edit.quality.models import audiobox, clap, clip, imagebind

RNG_SEED = 0
LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]


def _torch():
    return pytest.importorskip("torch", reason="needs torch: pip install 'perckit[quality]' (a CPU torch first)")


def _transformers():
    _torch()
    return pytest.importorskip("transformers", reason="needs transformers: pip install 'perckit[quality]'")


def _sample(frames=None, audio=None, sample_rate=16000, text="a dog barks on the left", fps=25.0):
    if frames is None:
        frames = np.random.default_rng(RNG_SEED).integers(0, 256, (5, 40, 48, 3), dtype=np.uint8)
    edited = Clip(frames=frames, fps=fps, audio=audio, sample_rate=sample_rate)
    source = Clip(frames=frames, fps=fps, audio=audio, sample_rate=sample_rate)
    return QualitySample(sample_id="s1", category="where", sub_track="W1", instruction=text, target_text=text,
                         edited=edited, source=source)


def _noise(seconds: float, sample_rate: int = 16000, seed: int = RNG_SEED) -> np.ndarray:
    return (0.1 * np.random.default_rng(seed).standard_normal(int(seconds * sample_rate))).astype(np.float32)


# --- the cosine math: golden values -------------------------------------------------------------------------

def test_l2_normalize_rows_and_zero_row():
    out = sim.l2_normalize([[3.0, 4.0], [0.0, 0.0]])
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]])


def test_cosine_golden():
    assert sim.cosine([1.0, 0.0], [1.0, 1.0]) == pytest.approx(1 / math.sqrt(2))
    assert sim.cosine([1.0, 2.0], [-2.0, -4.0]) == pytest.approx(-1.0)
    assert sim.cosine([1.0, 0.0], [0.0, 5.0]) == pytest.approx(0.0)
    assert sim.cosine([0.0, 0.0], [1.0, 1.0]) == 0.0  # a zero embedding has no direction: 0, not nan


def test_cosine_rows_broadcasts_one_vector():
    np.testing.assert_allclose(sim.cosine_rows([[1, 0], [0, 1], [1, 1]], [1, 0]), [1.0, 0.0, 1 / math.sqrt(2)])


def test_clip_score_is_100_max_cos_0_per_frame_then_mean():
    frames = [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [3.0, 4.0]]  # cos with [1, 0]: 1, 0, -1 (clamped to 0), 0.6
    np.testing.assert_allclose(sim.clip_scores(frames, [2.0, 0.0]), [100.0, 0.0, 0.0, 60.0])
    assert sim.clip_score(frames, [2.0, 0.0]) == pytest.approx(40.0)
    assert sim.clip_score(frames, [2.0, 0.0], w=2.5) == pytest.approx(1.0)  # Hessel et al.'s w


@pytest.mark.parametrize("w", [0, -1.0, float("nan"), float("inf"), True, "100"])
def test_clip_score_weight_must_be_positive_number(w):
    with pytest.raises(OptionError, match="positive finite weight"):
        sim.clip_score([[1.0, 0.0]], [1.0, 0.0], w=w)


def test_temporal_consistency_golden():
    # consecutive cosines: (f0, f1) = 1, (f1, f2) = 0, (f2, f3) = 0.6 -> mean 1.6 / 3
    feats = [[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.8, 0.6]]
    assert sim.temporal_consistency(feats) == pytest.approx(1.6 / 3)
    assert sim.temporal_consistency([[1.0, 2.0]]) is None
    assert sim.temporal_consistency(np.ones((4, 3))) == pytest.approx(1.0)


def test_similarity_shape_errors_name_the_function():
    with pytest.raises(ValueError, match="feature sizes differ"):
        sim.cosine([1.0, 0.0], [1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="row counts differ"):
        sim.cosine_rows(np.ones((2, 2)), np.ones((3, 2)))
    with pytest.raises(ValueError, match="temporal_consistency"):
        sim.temporal_consistency([1.0, 2.0])
    with pytest.raises(ValueError, match="clip_score: expected one text feature vector"):
        sim.clip_score(np.ones((2, 2)), np.ones((1, 2)))
    with pytest.raises(ValueError, match="finite"):
        sim.cosine([1.0, float("nan")], [1.0, 0.0])


def test_entries_name_these_factories():
    assert BY_KEY["tv_a"].factory == ".clip:build_clip" and BY_KEY["tc"] is BY_KEY["tv_a"]
    assert BY_KEY["ta_a"].factory == ".clap:build_clap"
    assert BY_KEY["av_a"].factory == ".imagebind:build_imagebind"
    assert BY_KEY["pq"].factory == ".audiobox:build_pq"


def test_importing_the_model_modules_imports_no_torch():
    import subprocess

    code = ("import sys; import perckit.reason_av_edit.quality.models.clip, perckit.reason_av_edit.quality.models.clap, "
            "perckit.reason_av_edit.quality.models.imagebind, perckit.reason_av_edit.quality.models.audiobox; "
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


# --- CLIP: TV-A and TC -------------------------------------------------------------------------------------

def _bpe_files(folder, vocab: dict) -> tuple[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    return str(folder / "vocab.json"), str(folder / "merges.txt")


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    """A tiny random CLIPModel and a CLIPProcessor with a 32 x 32 image processor and a tiny tokenizer."""
    torch = _torch()
    tr = _transformers()
    vocab = {c: i for i, c in enumerate(LETTERS)}
    vocab.update({c + "</w>": len(vocab) + i for i, c in enumerate(LETTERS)})
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    tok = tr.CLIPTokenizer(*_bpe_files(tmp_path_factory.mktemp("clip_tok"), vocab))
    torch.manual_seed(RNG_SEED)
    config = tr.CLIPConfig(
        text_config=dict(vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                         max_position_embeddings=16, bos_token_id=vocab["<|startoftext|>"], eos_token_id=vocab["<|endoftext|>"],
                         pad_token_id=vocab["<|endoftext|>"]),
        vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=32, patch_size=16),
        projection_dim=8,
    )
    model = tr.CLIPModel(config).eval()
    image_processor = tr.CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    return model, tr.CLIPProcessor(image_processor=image_processor, tokenizer=tok)


def test_clip_tv_a_and_tc_are_the_similarity_math_of_the_model_features(tiny_clip):
    model, processor = tiny_clip
    metric = clip.CLIPMetric(model, processor)
    s = _sample()
    rec = metric.measure(s)
    feats = metric.image_features(s.edited.frames)
    assert feats.shape == (5, 8) and rec["frames"] == 5
    assert rec["tv_a"] == pytest.approx(sim.clip_score(feats, metric.text_features(s.target_text)))
    assert rec["tc"] == pytest.approx(sim.temporal_consistency(feats))
    assert 0.0 <= rec["tv_a"] <= 100.0 and -1.0 <= rec["tc"] <= 1.0
    assert metric.measure(s) == rec  # deterministic


def test_clip_still_video_is_fully_consistent(tiny_clip):
    frame = np.random.default_rng(1).integers(0, 256, (1, 40, 48, 3), dtype=np.uint8)
    rec = clip.CLIPMetric(*tiny_clip).measure(_sample(frames=np.repeat(frame, 4, axis=0)))
    assert rec["tc"] == pytest.approx(1.0, abs=1e-6)


def test_clip_frame_stride_embeds_every_kth_frame(tiny_clip):
    s = _sample()
    full = clip.CLIPMetric(*tiny_clip)
    rec = clip.CLIPMetric(*tiny_clip, frame_stride=2).measure(s)
    feats = full.image_features(s.edited.frames[::2])
    assert rec["frames"] == 3
    assert rec["tc"] == pytest.approx(sim.temporal_consistency(feats))
    with pytest.raises(OptionError, match="clip_frame_stride"):
        clip.CLIPMetric(*tiny_clip, frame_stride=0)


def test_clip_one_frame_empty_text_and_reduce(tiny_clip):
    metric = clip.CLIPMetric(*tiny_clip)
    one = metric.measure(_sample(frames=np.zeros((1, 32, 32, 3), dtype=np.uint8)))
    assert one["tc"] is None and one["tv_a"] is not None
    empty = metric.measure(_sample(text="  "))
    assert empty["tv_a"] is None and empty["tc"] is not None
    out = metric.reduce([{"tv_a": 10.0, "tc": 0.5}, {"tv_a": 30.0, "tc": None}, {"tv_a": None, "tc": 0.7}])
    assert out == {"tv_a": pytest.approx(20.0), "tc": pytest.approx(0.6)}
    assert metric.reduce([]) == {"tv_a": None, "tc": None}


def test_clip_long_text_is_truncated_to_the_text_positions(tiny_clip):
    metric = clip.CLIPMetric(*tiny_clip)
    assert metric.max_tokens == 16
    assert metric.text_features("abc " * 40).shape == (8,)


def test_clip_refuses_what_is_not_clip(tiny_clip):
    model, processor = tiny_clip
    with pytest.raises(OptionError, match="expected a CLIPModel"):
        clip.CLIPMetric(object(), processor)
    with pytest.raises(OptionError, match="expected a CLIPProcessor"):
        clip.CLIPMetric(model, object())


def test_build_clip_without_cache_is_unavailable_with_the_download_command():
    _transformers()
    with pytest.raises(ModelUnavailable, match=r"huggingface-cli download openai/clip-vit-large-patch14"):
        clip.build_clip(None, ModelOptions())
    with pytest.raises(ModelUnavailable, match=r"huggingface-cli download someone/clip-not-cached"):
        clip.build_clip("someone/clip-not-cached", ModelOptions())


def test_build_clip_from_a_local_folder_gives_the_same_scores(tiny_clip, tmp_path):
    model, processor = tiny_clip
    model.save_pretrained(tmp_path)
    processor.save_pretrained(tmp_path)
    built = clip.build_clip(str(tmp_path), ModelOptions(extra={"clip_frame_stride": 2}))
    assert built.frame_stride == 2
    s = _sample()
    expected = clip.CLIPMetric(model, processor, frame_stride=2).measure(s)
    got = built.measure(s)
    assert got["tv_a"] == pytest.approx(expected["tv_a"], rel=1e-5)
    assert got["tc"] == pytest.approx(expected["tc"], rel=1e-5)


def test_build_clip_bad_weights(tmp_path):
    _transformers()
    with pytest.raises(InputNotFoundError, match="neither an existing local folder nor a Hugging Face repo id"):
        clip.build_clip(str(tmp_path / "missing" / "deeper"), ModelOptions())
    with pytest.raises(OptionError, match="cannot load a CLIPModel"):
        clip.build_clip(str(tmp_path), ModelOptions())  # exists, holds no model
    with pytest.raises(OptionError, match="expected a local folder"):
        clip.build_clip(3, ModelOptions())
    with pytest.raises(OptionError, match="clip_frame_stride"):
        clip.build_clip(None, ModelOptions(extra={"clip_frame_stride": "2"}))


# --- CLAP: TA-A ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_clap(tmp_path_factory):
    """A tiny random (unfused) ClapModel and a ClapProcessor: LAION's feature extractor defaults (48 kHz,
    64 mel bins, 10 s) and a tiny RoBERTa tokenizer."""
    torch = _torch()
    tr = _transformers()
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4}
    vocab.update({c: len(vocab) + i for i, c in enumerate([*LETTERS, "Ġ"])})
    tok = tr.RobertaTokenizer(*_bpe_files(tmp_path_factory.mktemp("clap_tok"), vocab))
    torch.manual_seed(RNG_SEED)
    config = tr.ClapConfig(
        text_config=dict(vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                         max_position_embeddings=24, pad_token_id=1),
        audio_config=dict(patch_embeds_hidden_size=16, depths=[1, 1], num_attention_heads=[2, 2], hidden_size=32, window_size=8),
        projection_dim=8,
    )
    model = tr.ClapModel(config).eval()
    return model, tr.ClapProcessor(feature_extractor=tr.ClapFeatureExtractor(), tokenizer=tok)


def test_resampled_rates():
    x = _noise(0.5)
    assert clap.resampled(x, 16000, 48000).shape == (24000,)
    assert clap.resampled(x, 16000, 16000).dtype == np.float32
    np.testing.assert_array_equal(clap.resampled(x, 16000, 16000), x)
    assert clap.resampled(np.zeros(0), 16000, 48000).shape == (0,)


def test_clap_ta_a_is_the_cosine_of_the_model_features(tiny_clap):
    metric = clap.CLAPMetric(*tiny_clap)
    assert metric.sample_rate == 48000 and metric.max_tokens == 22 and not metric.fusion
    s = _sample(audio=_noise(1.0))
    rec = metric.measure(s)
    expected = sim.cosine(metric.text_features(s.target_text), metric.audio_features(s.edited.audio, 16000))
    assert rec["ta_a"] == pytest.approx(expected)
    assert -1.0 <= rec["ta_a"] <= 1.0
    assert metric.measure(s) == rec  # deterministic (no random crop)


def test_clap_audio_longer_than_10_s_is_cut_to_its_start(tiny_clap):
    metric = clap.CLAPMetric(*tiny_clap)
    long = _noise(11.0, 48000)
    np.testing.assert_allclose(metric.audio_features(long, 48000), metric.audio_features(long[:480000], 48000), rtol=1e-5, atol=1e-6)


def test_clap_without_audio_or_text_and_reduce(tiny_clap):
    metric = clap.CLAPMetric(*tiny_clap)
    assert metric.measure(_sample(audio=None)) == {"ta_a": None}
    assert metric.measure(_sample(audio=np.zeros(0, dtype=np.float32))) == {"ta_a": None}
    assert metric.measure(_sample(audio=_noise(0.5), text="")) == {"ta_a": None}
    assert metric.reduce([{"ta_a": 0.2}, {"ta_a": None}, {"ta_a": 0.4}]) == {"ta_a": pytest.approx(0.3)}
    with pytest.raises(OptionError, match="expected a ClapModel"):
        clap.CLAPMetric(object(), tiny_clap[1])


def test_build_clap_without_cache_and_from_a_local_folder(tiny_clap, tmp_path):
    model, processor = tiny_clap
    with pytest.raises(ModelUnavailable, match=r"huggingface-cli download laion/clap-htsat-unfused"):
        clap.build_clap(None, ModelOptions())
    model.save_pretrained(tmp_path)
    processor.save_pretrained(tmp_path)
    built = clap.build_clap(tmp_path, ModelOptions())
    s = _sample(audio=_noise(1.0))
    assert built.measure(s)["ta_a"] == pytest.approx(clap.CLAPMetric(model, processor).measure(s)["ta_a"], rel=1e-5)


# --- ImageBind: AV-A ----------------------------------------------------------------------------------------

def test_clip_windows_are_pytorchvideos_constant_clips():
    # a 121-frame clip at 25 fps: 4.84 s; 5 windows of 2 s start every (4.84 - 2) / 5 s
    starts = [float(s) for s, _ in imagebind.clip_windows(4.84, 5)]
    np.testing.assert_allclose(starts, [0.0, 0.568, 1.136, 1.704, 2.272])
    assert all(e - s == 2 for s, e in imagebind.clip_windows(4.84, 5))
    assert imagebind.clip_windows(1.5, 3) == [(Fraction(0), Fraction(2))] * 3  # shorter than a window: all at 0


def test_window_frames_and_crops():
    np.testing.assert_array_equal(imagebind.window_frames(121, 25.0, Fraction(0), Fraction(2)), np.arange(50))
    # starts at 0.568 s = frame 14.2: frames 15 .. 64 (ceil(14.2) to ceil(64.2) - 1)
    idx = imagebind.window_frames(121, 25.0, Fraction(0.568), Fraction(0.568) + 2)
    assert (idx[0], idx[-1]) == (15, 64)
    np.testing.assert_array_equal(imagebind.window_frames(1, 25.0, Fraction(1), Fraction(3)), [0])
    assert imagebind.crop_offsets(224, 398) == [(0, 0), (0, 87), (0, 174)]  # landscape: left, centre, right
    assert imagebind.crop_offsets(398, 224) == [(0, 0), (87, 0), (174, 0)]  # portrait: top, centre, bottom
    assert imagebind.crop_offsets(224, 224) == [(0, 0)] * 3


def test_vision_input_layout_and_values():
    _torch()
    frames = np.zeros((10, 48, 64, 3), dtype=np.uint8)
    frames[..., 0] = 255  # pure red
    x = imagebind.vision_input(frames, fps=5.0)
    assert tuple(x.shape) == (1, 15, 3, 2, 224, 224)
    expect = [(1.0 - imagebind.VISION_MEAN[0]) / imagebind.VISION_STD[0], -imagebind.VISION_MEAN[1] / imagebind.VISION_STD[1],
              -imagebind.VISION_MEAN[2] / imagebind.VISION_STD[2]]
    np.testing.assert_allclose(x[0, :, :, :, 100, 100].numpy(), np.broadcast_to(np.array(expect)[None, :, None], (15, 3, 2)), rtol=1e-5)


def _melspec_stand_in(waveform, sample_rate, num_mel_bins, target_length):
    """A stand-in for ``imagebind.data.waveform2melspec`` (the package needs torchaudio's Kaldi fbank): the
    same signature, in-place mean removal and (1, bins, frames) output cut / padded to ``target_length``;
    its "bins" are the log energies of 25 ms frames every 10 ms in ``num_mel_bins`` equal sub-bands."""
    import torch

    waveform -= waveform.mean()
    win, hop = int(0.025 * sample_rate), int(0.010 * sample_rate)
    w = torch.nn.functional.pad(waveform[0], (0, max(0, win - waveform.shape[1])))
    frames = w.unfold(0, win, hop)  # (n, win)
    spec = torch.fft.rfft(frames).abs() ** 2
    bands = torch.stack([b.sum(-1) for b in torch.tensor_split(spec, num_mel_bins, dim=-1)], dim=0)  # (bins, n)
    fbank = torch.log(bands + 1e-6)
    p = target_length - fbank.shape[1]
    fbank = torch.nn.functional.pad(fbank, (0, p)) if p > 0 else fbank[:, :target_length]
    return fbank[None]


class _ImageBindStandIn:
    """A stand-in with ImageBindModel's call API: ``{modality: (B, S, ...)}`` -> ``{modality: (B, dim)}``, the S
    clips embedded one by one (mean-pooled then a fixed projection) and averaged, L2-normalised as ImageBind's
    postprocessors do. It records the shapes it was called with."""

    def __init__(self):
        import torch

        g = torch.Generator().manual_seed(RNG_SEED)
        self.proj = {"vision": torch.randn(3 * 2, 8, generator=g), "audio": torch.randn(8, 8, generator=g)}
        self.calls = []

    def __call__(self, inputs):
        import torch

        out = {}
        for key, x in inputs.items():
            self.calls.append((key, tuple(x.shape)))
            b, s = x.shape[:2]
            flat = x.reshape(b * s, *x.shape[2:])
            if key == "vision":
                pooled = flat.mean(dim=(-1, -2)).reshape(b * s, -1)  # (B*S, C*T)
            else:
                pooled = flat.reshape(b * s, -1, 8).mean(dim=1)  # (B*S, 8)
            emb = (pooled @ self.proj[key]).reshape(b, s, -1).mean(dim=1)
            out[key] = torch.nn.functional.normalize(emb, dim=-1)
        return out


def test_audio_input_layout_and_imagebinds_shared_waveform():
    torch = _torch()
    a = _noise(4.84) + 0.5  # an offset: the mean removal shows
    original = a.copy()
    x = imagebind.audio_input(a, 16000, _melspec_stand_in)
    assert tuple(x.shape) == (1, 3, 1, 128, 204)
    np.testing.assert_array_equal(a, original)  # the caller's array is not edited in place
    # clip 1 starts at 0.947 s, inside clip 0 ([0, 2) s): its overlap had clip 0's mean removed first, as in
    # ImageBind's loader, so it differs from clip 1 computed on the untouched waveform
    w = torch.tensor(a)[None]
    start = int(imagebind.clip_windows(4.84, 3)[1][0] * 16000)
    fresh = (_melspec_stand_in(w[:, start:start + 32000].clone(), 16000, 128, 204) - imagebind.AUDIO_MEAN) / imagebind.AUDIO_STD
    assert not torch.allclose(x[0, 1], fresh)


def test_imagebind_av_a_is_the_cosine_of_audio_and_vision_embeddings():
    _torch()
    model = _ImageBindStandIn()
    metric = imagebind.ImageBindMetric(model, melspec=_melspec_stand_in)
    frames = np.random.default_rng(2).integers(0, 256, (30, 48, 64, 3), dtype=np.uint8)
    s = _sample(frames=frames, audio=_noise(1.2, 8000), sample_rate=8000, fps=10.0)
    rec = metric.measure(s)
    assert model.calls == [("vision", (1, 15, 3, 2, 224, 224)), ("audio", (1, 3, 1, 128, 204))]
    v = model({"vision": imagebind.vision_input(frames, 10.0)})["vision"][0].numpy()
    a = model({"audio": imagebind.audio_input(s.edited.audio, 8000, _melspec_stand_in)})["audio"][0].numpy()
    assert rec["av_a"] == pytest.approx(sim.cosine(a, v))
    assert metric.measure(_sample(frames=frames, audio=None)) == {"av_a": None}
    assert metric.reduce([{"av_a": 0.1}, {"av_a": None}, {"av_a": 0.3}]) == {"av_a": pytest.approx(0.2)}


def test_imagebind_without_the_package_is_unavailable_with_the_install_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "imagebind", None)  # absent, whatever is installed
    with pytest.raises(ModelUnavailable, match=r"pip install git\+https://github.com/facebookresearch/ImageBind"):
        imagebind.build_imagebind(None, ModelOptions())
    with pytest.raises(ModelUnavailable, match="imagebind"):
        imagebind.ImageBindMetric(_ImageBindStandIn())  # no melspec given: the package's is needed


def test_imagebind_real_package_small_model():
    _torch()
    ib = pytest.importorskip("imagebind.models.imagebind_model",
                             reason="the imagebind package is not installed (not on PyPI: pip install git+https://github.com/facebookresearch/ImageBind)")
    data = pytest.importorskip("imagebind.data", reason="imagebind.data needs torchaudio / pytorchvideo")
    small = {f"{m}_{k}": v for m in ("vision", "text", "audio", "depth", "thermal", "imu")
             for k, v in (("embed_dim", 32), ("num_blocks", 1), ("num_heads", 2))}
    model = ib.ImageBindModel(out_embed_dim=16, **small)
    metric = imagebind.ImageBindMetric(model, melspec=data.waveform2melspec, vision_key=ib.ModalityType.VISION,
                                       audio_key=ib.ModalityType.AUDIO)
    frames = np.random.default_rng(3).integers(0, 256, (50, 48, 64, 3), dtype=np.uint8)
    rec = metric.measure(_sample(frames=frames, audio=_noise(2.0)))
    assert -1.0 <= rec["av_a"] <= 1.0


# --- Audiobox Aesthetics: PQ --------------------------------------------------------------------------------

def test_pq_windows_and_weighting_golden():
    wavs, masks, weights = audiobox.windows(np.ones(25), window=10, hop=10)
    assert wavs.shape == (3, 10)
    np.testing.assert_array_equal(weights, [1.0, 1.0, 0.5])
    np.testing.assert_array_equal(masks[2], [True] * 5 + [False] * 5)
    np.testing.assert_array_equal(wavs[2], [1.0] * 5 + [0.0] * 5)
    assert audiobox.windows(np.zeros(0), 10, 10)[2].size == 0
    # predictions 1, 2, 3 (normalised) -> ratings 7, 9, 11 with mean 5, std 2; weights 1, 1, 0.5 -> 21.5 / 2.5
    assert audiobox.weighted_rating([1.0, 2.0, 3.0], [1.0, 1.0, 0.5], mean=5.0, std=2.0) == pytest.approx(8.6)


@pytest.fixture
def aes_tiny(monkeypatch):
    """The package's AesMultiOutput with a 2-layer, 32-wide WavLM (its configuration swapped while built)."""
    torch = _torch()
    aes = pytest.importorskip("audiobox_aesthetics.model.aes", reason=f"needs audiobox_aesthetics: {audiobox.INSTALL}")
    from audiobox_aesthetics.model.wavlm import WavLMConfig

    cfg = dict(aes.DEFAULT_AUDIO_CFG.__dict__)
    cfg.update(encoder_layers=2, encoder_embed_dim=32, encoder_ffn_embed_dim=64, encoder_attention_heads=2,
               conv_feature_layers="[(32,10,5)] + [(32,3,2)] * 4 + [(32,2,2)] * 2", conv_pos=16, conv_pos_groups=4,
               num_buckets=32, max_distance=64)
    monkeypatch.setattr(aes, "DEFAULT_AUDIO_CFG", WavLMConfig(cfg))
    torch.manual_seed(RNG_SEED)
    tt = {axis: {"mean": 5.0 + i, "std": 2.0} for i, axis in enumerate(aes.AXES_NAME)}
    return aes, aes.AesMultiOutput(nth_layer=3, target_transform=tt).eval()


@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")
def test_pq_is_the_models_pq_output_on_the_rating_scale(aes_tiny):
    torch = _torch()
    _, model = aes_tiny
    metric = audiobox.PQMetric(model)
    a = _noise(3.0)
    rec = metric.measure(_sample(audio=a))
    wav = torch.zeros(1, 1, 160000)
    wav[0, 0, :48000] = torch.from_numpy(a)
    mask = torch.zeros(1, 1, 160000, dtype=torch.bool)
    mask[..., :48000] = True
    with torch.inference_mode():
        raw = float(model({"wav": wav, "mask": mask})["PQ"][0])
    assert rec["pq"] == pytest.approx(raw * 2.0 + 8.0, rel=1e-5)  # PQ's mean 5 + 3, std 2
    assert metric.measure(_sample(audio=None)) == {"pq": None}
    assert metric.reduce([{"pq": 6.0}, {"pq": None}, {"pq": 7.0}]) == {"pq": pytest.approx(6.5)}


@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")
def test_build_pq_from_the_hub_folder_and_from_checkpoint_pt(aes_tiny, tmp_path):
    torch = _torch()
    _, model = aes_tiny
    s = _sample(audio=_noise(2.0))
    expected = audiobox.PQMetric(model).measure(s)["pq"]
    model.save_pretrained(tmp_path / "hub")  # config.json + model.safetensors, the facebook/audiobox-aesthetics layout
    assert audiobox.build_pq(str(tmp_path / "hub"), ModelOptions()).measure(s)["pq"] == pytest.approx(expected, rel=1e-5)
    ckpt = {"state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
            "model_cfg": {"nth_layer": 3, "proj_num_layer": 1, "precision": "32"}, "target_transform": model.target_transform}
    torch.save(ckpt, tmp_path / "checkpoint.pt")
    assert audiobox.build_pq(str(tmp_path / "checkpoint.pt"), ModelOptions()).measure(s)["pq"] == pytest.approx(expected, rel=1e-5)


def test_build_pq_unavailable_and_bad_weights(tmp_path):
    _torch()
    pytest.importorskip("audiobox_aesthetics.model.aes", reason=f"needs audiobox_aesthetics: {audiobox.INSTALL}")
    with pytest.raises(ModelUnavailable, match=r"huggingface-cli download facebook/audiobox-aesthetics"):
        audiobox.build_pq(None, ModelOptions())
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(OptionError, match="cannot be read as a torch checkpoint"):
        audiobox.build_pq(str(tmp_path / "junk.pt"), ModelOptions())
    with pytest.raises(OptionError, match="neither config.json"):
        audiobox.build_pq(str(tmp_path), ModelOptions())
    with pytest.raises(InputNotFoundError):
        audiobox.build_pq(str(tmp_path / "nope" / "x.pt"), ModelOptions())
    with pytest.raises(OptionError, match="target_transform"):
        audiobox.PQMetric(lambda batch: batch)


def test_build_pq_without_the_package_is_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "audiobox_aesthetics", None)
    monkeypatch.setitem(sys.modules, "audiobox_aesthetics.model", None)
    monkeypatch.setitem(sys.modules, "audiobox_aesthetics.model.aes", None)
    with pytest.raises(ModelUnavailable, match="pip install --no-deps audiobox_aesthetics"):
        audiobox.build_pq(None, ModelOptions())


# --- end to end through av_edit_quality ---------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")
def test_av_edit_quality_runs_the_four_metrics_on_tiny_networks(tiny_clip, tiny_clap, aes_tiny):
    from helpers.edit_quality import box_region, edit_box, reference, rgb_mp4

    from perckit.reason_av_edit import make_quality_prediction
    from perckit.reason_av_edit.features import encode_wav
    from perckit.reason_av_edit.metric import decode_wav
    from perckit.reason_av_edit.quality import metric as core

    box = (8, 8, 20, 20)
    refs, preds, edits = [], [], {}
    for i, sid in enumerate(("w1", "w2")):
        src = np.random.default_rng(10 + i).integers(0, 256, (5, 32, 32, 3), dtype=np.uint8)
        audio = encode_wav(_noise(1.0, seed=20 + i), 16000)
        refs.append(reference(sid, src, box_region(5, 32, 32, box), audio=audio, instruction=f"a dog barks {sid}"))
        edited = edit_box(src, box, 40 * i)
        edited_audio = encode_wav(_noise(1.0, seed=30 + i), 16000)
        preds.append(make_quality_prediction(sid, rgb_mp4(edited), edited_audio))
        edits[sid] = _sample(frames=edited, audio=decode_wav(edited_audio, sid), text=f"a dog barks {sid}")
    models = {"clip": clip.CLIPMetric(*tiny_clip), "ta_a": clap.CLAPMetric(*tiny_clap),
              "av_a": imagebind.ImageBindMetric(_ImageBindStandIn(), melspec=_melspec_stand_in), "pq": audiobox.PQMetric(aes_tiny[1])}
    keys = ["tv_a", "tc", "ta_a", "av_a", "pq"]
    out = core.av_edit_quality(preds, refs, metrics=keys, models=models)
    for k in keys:
        assert out[f"n_{k}"] == 2 and k not in out["skipped"], k
    # the decoded edit is the same frames (RGB-lossless mp4) and the same 16-bit WAV samples: the same scores
    for key, name in (("tv_a", "clip"), ("tc", "clip"), ("ta_a", "ta_a"), ("pq", "pq")):
        expected = np.mean([models[name].measure(s)[key] for s in edits.values()])
        assert out[key] == pytest.approx(expected, rel=1e-4, abs=1e-6), key
    assert -1.0 <= out["av_a"] <= 1.0
