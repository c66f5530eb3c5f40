"""The dataset card (``README.md``) of a ``perckit convert`` export, written for a reader on the Hub.

The YAML front matter carries the packaged builder card's metadata (:data:`CARD_KEYS`: the name, the licence
with ``license_name`` / ``license_link`` when it is ``other``, the tasks, tags, languages and size), the
``configs`` (``data_files`` per split, the default marked) and the ``dataset_info`` of every Parquet config
(features, integer ``num_bytes`` / ``num_examples``, ``dataset_size``), written with ``datasets``' own
``MetadataConfigs`` and ``DatasetInfosDict`` so every datasets line reads them back.

The body says what the benchmark is (the builder card's "What the benchmark is" section), lists the configs
(what a row is, splits with row counts, folder), shows how to load them with plain ``datasets``, how to decode
the COCO RLE masks, how to score with perckit's metrics, the ``preview`` column, the configs the Dataset Viewer
does not show and why, the citation and the licence. It never dumps the features JSON.

The record (``state``, see :mod:`perckit.export.state`) comes from the export folder and is untrusted: the
text of its fields that the card shows (descriptions, Viewer reasons, column names) is capped, kept on one
line, HTML-escaped and has its Markdown table pipes escaped. The text is deterministic for the same inputs.

Reading a card back (:func:`read_card_configs`: a copy of a pushed export has no record, so its card names the
files) treats it as untrusted too: a capped regular file, its ``configs`` checked field by field, every
``data_files`` path relative and inside the export folder.
"""

from __future__ import annotations

import html
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets

from ..hf import benchmark as benchmarks
from ..hf.entrypoints import builder_class, scripts_root
from ..errors import InputNotFoundError, ReleaseFormatError, short_repr
from ..io.jsonio import decode_text
from ..io.paths import check_relative, read_regular_file, resolve_under, write_atomic

#: A config name and a split name as the export record and the card's front matter may hold them.
CONFIG_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
SPLIT_NAME = re.compile(r"^\w{1,128}(\.\w{1,128})*$", re.ASCII)

#: the builder card keys the export's card carries (in this order)
CARD_KEYS = ("pretty_name", "license", "license_name", "license_link", "task_categories", "tags", "language",
             "size_categories")
#: keys the builder card must have
REQUIRED_KEYS = ("pretty_name", "license", "task_categories", "tags", "size_categories")
#: longest text of one untrusted record field shown in the card (a description, a Viewer reason)
MAX_FIELD_CHARS = 300
#: longest column name shown
MAX_NAME_CHARS = 80
#: most columns listed per config
MAX_COLUMNS = 60
#: deepest feature nesting walked when looking for masks
MAX_DEPTH = 12
#: placeholder for the Hub repository id (the card does not know where it will be pushed)
REPO_PLACEHOLDER = "<this repo>"
#: largest ``README.md`` read (the packaged builder card, or an export's card read back: a perckit card is a few
#: KB, a card of every config with its ``dataset_info`` stays far below)
MAX_CARD_BYTES = 1 << 20
#: most ``data_files`` paths and patterns one config of an export's card may list
MAX_CARD_ENTRIES = 10_000

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)
_LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")
_TAG = re.compile(r"[ \t]*\[(?:card|code|inferred|3rd)(?:\s*\+\s*(?:card|code|inferred|3rd))*\](?!\()")

#: what the ``preview`` column shows, per benchmark
PREVIEW_TEXT = {
    "r4d_bench": "the referred masks drawn over the scene frame",
    "refcoco_m": "the referred mask drawn over the image",
    "m4seg": "the grounded masks drawn on their image canvases (over the photos when the export was made with `image_root`)",
    "syn4d": "the point tracks drawn over the first frame",
    "reason_av_edit": "the anchor frame with the edited region marked",
}


# ---------------------------------------------------------------------------------------------- builder card


def builder_card_path(benchmark: str) -> Path:
    """``builders/<benchmark>/README.md`` as packaged (the wheel's ``perckit.builders``, else the checkout)."""
    benchmarks.get(benchmark)  # an OptionError naming the known benchmarks
    return scripts_root("builders") / benchmark / "README.md"


def _read_builder_card(benchmark: str) -> tuple[str, dict, str]:
    """(how messages name the packaged builder card, its front matter, its body)."""
    path = builder_card_path(benchmark)
    if not path.is_file():
        raise InputNotFoundError(f"builder card {str(path)!r} not found: expected the {benchmark} dataset card "
                                 f"(packaged as perckit/builders/{benchmark}/README.md)")
    where = f"builder card {str(path)!r}"
    text = _read_text(path, where)
    m = _FRONT_MATTER.match(text)
    if not m:
        raise ReleaseFormatError(f"{where}: expected YAML front matter between '---' lines at the top, got none")
    return where, _front_matter(m.group(1), where), text[m.end():]


def _read_text(path: Path, where: str) -> str:
    """A card's text: a regular file of at most :data:`MAX_CARD_BYTES`, UTF-8 (the checked reader)."""
    return decode_text(read_regular_file(path, where, MAX_CARD_BYTES, ReleaseFormatError), where)


def _front_matter(text: str, where: str) -> dict:
    """The YAML front matter as a mapping (safe loader: plain data only), else ``ReleaseFormatError``."""
    import yaml

    try:
        meta = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, RecursionError, ValueError, TypeError, OverflowError) as e:
        raise ReleaseFormatError(f"{where}: expected YAML front matter, got a YAML error ({str(e)[:200]})") from None
    if not isinstance(meta, dict):
        raise ReleaseFormatError(f"{where}: expected a YAML mapping as front matter, got {type(meta).__name__}")
    return meta


def builder_card_metadata(benchmark: str) -> dict:
    """The keys of :data:`CARD_KEYS` from the front matter of the packaged builder card, in that order.

    :class:`~perckit.errors.InputNotFoundError` naming the file when the card is absent;
    :class:`~perckit.errors.ReleaseFormatError` naming it when the front matter is missing, not YAML, lacks a
    key of :data:`REQUIRED_KEYS`, or has ``license: other`` without ``license_name`` and an absolute
    ``license_link`` (an export is pushed to another repository, where a relative link would be broken)."""
    where, meta, _ = _read_builder_card(benchmark)
    missing = [k for k in REQUIRED_KEYS if not meta.get(k)]
    if missing:
        raise ReleaseFormatError(f"{where}: expected the front matter keys {list(REQUIRED_KEYS)}, missing {missing}")
    if meta["license"] == "other":
        name, link = meta.get("license_name"), meta.get("license_link")
        if not isinstance(name, str) or not name.strip():
            raise ReleaseFormatError(f"{where}: 'license: other' needs a 'license_name' saying what the terms are, got {name!r}")
        if not isinstance(link, str) or not link.startswith("https://"):
            raise ReleaseFormatError(f"{where}: 'license_link': expected an absolute https:// link (the export lives in "
                                     f"another repository), got {link!r}")
    return {k: meta[k] for k in CARD_KEYS if k in meta}


def _sections(body: str) -> tuple[str, dict[str, str]]:
    """The text before the first ``## `` heading and every ``## `` section by title (code blocks respected)."""
    intro: list[str] = []
    sections: dict[str, list[str]] = {}
    current = intro
    fenced = False
    for line in body.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
            continue
        current.append(line)
    return "\n".join(intro).strip(), {k: "\n".join(v).strip() for k, v in sections.items()}


def _for_hub(text: str) -> str:
    """Builder-card prose for a Hub page: relative links become their text (they point into the perckit
    checkout, not into the export), provenance tags such as ``[card]`` are dropped."""
    text = _LINK.sub(lambda m: m.group(0) if m.group(2).startswith(("https://", "http://")) else m.group(1), text)
    return _TAG.sub("", text)


def builder_card_sections(benchmark: str) -> dict[str, str]:
    """``about``, ``licence`` and ``citation`` from the packaged builder card, ready for the export's card
    (``about``: its "What the benchmark is" section, else its first section, else its opening paragraphs)."""
    _, _, body = _read_builder_card(benchmark)
    intro, sections = _sections(body)
    about = sections.get("What the benchmark is")
    if about is None:
        about = next((v for k, v in sections.items() if k != "Contents"), "")
    if not about:
        about = "\n".join(line for line in intro.splitlines() if not line.startswith("# "))
    return {"about": _for_hub(about).strip(), "licence": _for_hub(sections.get("Licence", "")).strip(),
            "citation": sections.get("Citation", "").strip()}


# ------------------------------------------------------------------------------------------- record fields


def cell(value: Any, limit: int = MAX_FIELD_CHARS) -> str:
    """Untrusted text for the card: one line, at most ``limit`` characters, HTML-escaped, table pipes escaped."""
    text = " ".join(str(value).split())
    if len(text) > limit:
        text = text[: limit - 3].rstrip() + "..."
    return html.escape(text, quote=False).replace("|", "\\|")


def _code(name: Any) -> str:
    """An untrusted name shown as inline code (backticks in it replaced)."""
    return "`" + cell(str(name).replace("`", "'"), MAX_NAME_CHARS) + "`"


def _ordered(configs: dict[str, dict]) -> list[tuple[str, dict]]:
    """The default config first, then the others by name."""
    return sorted(configs.items(), key=lambda kv: (not kv[1].get("default"), kv[0]))


def config_features(name: str, c: dict, where: str = "export record") -> datasets.Features:
    """The ``features`` of the record's config ``name`` as ``datasets.Features``, else ``ReleaseFormatError`` naming
    ``where`` (the record file, :func:`perckit.export.state.read_state`)."""
    try:
        return datasets.Features.from_dict(c["features"])
    except Exception as e:  # a hostile record: KeyError, TypeError, RecursionError, ...
        raise ReleaseFormatError(f"{where}: configs[{name!r}]: 'features': expected datasets.Features.to_dict() "
                                 f"output, got a dict that does not load ({type(e).__name__}: {str(e)[:200]})") from None


def _type_name(feature: Any, depth: int = 0) -> str:
    """A short type a reader understands: ``string``, ``Image``, ``COCO RLE mask``, ``list of ...``."""
    if depth > MAX_DEPTH:
        return "nested"
    if _is_rle(feature):
        return "COCO RLE mask"
    if isinstance(feature, dict):
        return "struct"
    inner = _list_item(feature)
    if inner is not None:
        return f"list of {_type_name(inner, depth + 1)}"
    if isinstance(feature, datasets.Value):
        return feature.dtype
    kind = type(feature).__name__
    if kind.startswith("Array") and hasattr(feature, "shape"):
        shape = " x ".join("N" if d is None else str(d) for d in feature.shape)
        return f"{feature.dtype} array [{shape}]"
    return kind


def _list_item(feature: Any) -> Any:
    """The item feature of a list feature (``[f]``, ``Sequence``, ``List``, ``LargeList``), else None."""
    if isinstance(feature, list) and len(feature) == 1:
        return feature[0]
    if type(feature).__name__ in ("Sequence", "List", "LargeList") and hasattr(feature, "feature"):
        return feature.feature
    return None


def _is_rle(feature: Any) -> bool:
    return isinstance(feature, dict) and set(feature) == {"size", "counts"}


def rle_columns(features: datasets.Features) -> list[str]:
    """Where COCO RLE masks ``{size, counts}`` sit: ``mask``, ``frames[].mask``, ``samples[].mask``..."""
    found: list[str] = []

    def walk(feature: Any, path: str, depth: int) -> None:
        if depth > MAX_DEPTH or len(found) >= MAX_COLUMNS:
            return
        if _is_rle(feature):
            found.append(path)
        elif isinstance(feature, dict):
            for key, sub in feature.items():
                walk(sub, f"{path}.{key}" if path else str(key), depth + 1)
        else:
            inner = _list_item(feature)
            if inner is not None:
                walk(inner, f"{path}[]", depth + 1)

    walk(dict(features), "", 0)
    return found


# ---------------------------------------------------------------------------------------------------- YAML


def _card_data(benchmark: str, state: dict) -> Any:
    """The YAML front matter of the export's card as a ``huggingface_hub.DatasetCardData`` (builder metadata,
    ``configs`` and ``dataset_info`` written by datasets' own ``MetadataConfigs`` / ``DatasetInfosDict``)."""
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCardData

    card_data = DatasetCardData(**builder_card_metadata(benchmark))
    configs: dict[str, dict] = {}
    infos: dict[str, datasets.DatasetInfo] = {}
    for name, c in sorted(state["configs"].items()):
        entry: dict = {"data_files": [{"split": s["name"], "path": f"{c['dir']}/{s['name']}-*"} for s in c["splits"]]}
        if c.get("default"):
            entry["default"] = True
        configs[name] = entry
        split_dict = datasets.SplitDict()
        for s in c["splits"]:
            split_dict.add(datasets.SplitInfo(name=s["name"], num_bytes=round(s["num_bytes"]), num_examples=int(s["num_examples"])))
        infos[name] = datasets.DatasetInfo(features=config_features(name, c), splits=split_dict, config_name=name,
                                           dataset_size=sum(round(s["num_bytes"]) for s in c["splits"]))
    MetadataConfigs(configs).to_dataset_card_data(card_data)
    if infos:
        DatasetInfosDict(infos).to_dataset_card_data(card_data)
    return card_data


# ---------------------------------------------------------------------------------------------------- body


def _config_table(benchmark: str, state: dict) -> list[str]:
    own = {c.name: c.description or "" for c in builder_class(benchmark).BUILDER_CONFIGS}
    lines = ["| config | what a row is | splits (rows) | folder |", "|---|---|---|---|"]
    for name, c in _ordered(state["configs"]):
        what = c.get("description") or own.get(name) or ""
        splits = ", ".join(f"{cell(s['name'])} ({int(s['num_examples']):,})" for s in c["splits"])
        label = f"`{name}`" + (" (default)" if c.get("default") else "")
        lines.append(f"| {label} | {cell(what)} | {splits} | `{c['dir']}/` |")
    lines.append("")
    for name, c in _ordered(state["configs"]):
        features = config_features(name, c)
        shown = list(features.items())[:MAX_COLUMNS]
        columns = ", ".join(f"{_code(k)} ({cell(_type_name(v), MAX_NAME_CHARS)})" for k, v in shown)
        more = f", and {len(features) - len(shown)} more" if len(features) > len(shown) else ""
        lines += [f"Columns of `{name}`: {columns}{more}.", ""]
    return lines


def _split_of(benchmark: str, c: dict) -> str:
    """The split the examples load: the benchmark's evaluation split (its last) when the config has it."""
    names = [s["name"] for s in c["splits"]]
    split = benchmarks.get(benchmark).splits[-1]
    return split if split in names or not names else names[-1]


def _load_section(benchmark: str, state: dict) -> list[str]:
    ordered = _ordered(state["configs"])
    lines = ["## Load with `datasets`", "",
             "The export is plain Parquet with no loading script: any `datasets` version that reads Parquet loads it "
             "(replace `<this repo>` by this repository's id, or give the path of a local copy).", "", "```python",
             "from datasets import load_dataset", ""]
    for name, c in ordered:
        lines.append(f'ds = load_dataset("{REPO_PLACEHOLDER}", "{name}", split="{cell(_split_of(benchmark, c))}")')
    lines += ["```", ""]
    for name, c in ordered:
        if c.get("parent") in state["configs"]:
            lines += [f"`{name}` holds media of `{c['parent']}` rows, joined by the key they share (the Hub documents "
                      "videos in Parquet; the Viewer plays each `Video` cell). `perckit.export.load_export` joins them "
                      "back into the builder's rows (see below).", ""]
    return lines


def _access(path: str) -> str:
    """``frames[].mask`` as Python: ``row["frames"][0]["mask"]`` (names quoted as JSON strings, no backticks)."""
    import json

    out = "row"
    for part in path.split("."):
        depth = 0
        while part.endswith("[]"):
            part, depth = part[:-2], depth + 1
        key = json.dumps(part.replace("`", "'")[:MAX_NAME_CHARS])
        out += f"[{key}]" + "[0]" * depth
    return out


def _rle_section(state: dict) -> list[str]:
    where = [(n, rle_columns(config_features(n, c))) for n, c in _ordered(state["configs"])]
    where = [(n, cols) for n, cols in where if cols]
    if not where:
        return []
    return ["## Masks (COCO RLE)", "",
            "Masks are compressed COCO run-length encodings `{\"size\": [H, W], \"counts\": str}` (the Viewer shows "
            "them as text). They sit in:", "", *(f"- `{name}`: " + ", ".join(_code(p) for p in cols) for name, cols in where),
            "", "Decode one to a boolean H x W array:", "", "```python",
            "from pycocotools import mask as mask_utils", "",
            f"m = {_access(where[0][1][0])}  # one RLE struct of a `{where[0][0]}` row",
            'binary = mask_utils.decode({"size": m["size"], "counts": m["counts"].encode("ascii")}).astype(bool)', "",
            "# or with perckit, which checks the RLE first:",
            "from perckit import rle", "",
            "binary = rle.decode(rle.validate(m))",
            "```", ""]


def _preview_section(benchmark: str, state: dict) -> list[str]:
    with_preview = [(n, c["preview"]) for n, c in _ordered(state["configs"]) if c.get("preview")]
    if not with_preview:
        return []
    names = ", ".join(f"`{n}`" for n, _ in with_preview)
    column = sorted({str(col) for _, col in with_preview})[0]
    shows = PREVIEW_TEXT.get(benchmark, "the row drawn as a picture")
    return ["## The preview column", "",
            f"The last column of {names}, {_code(column)}, is an `Image` perckit drew for the Dataset Viewer: {shows}. "
            "It is a small picture of the row for a person, not part of the release; the reference helpers below "
            "ignore it, and `ds.remove_columns(\"preview\")` drops it. `perckit convert --no-preview` makes an "
            "export without it.", ""]


def _viewer_section(state: dict) -> list[str]:
    hidden = [(n, c["viewer"]) for n, c in _ordered(state["configs"])
              if isinstance(c.get("viewer"), dict) and c["viewer"].get("viewable") is False]
    if not hidden:
        return []
    return ["## Dataset Viewer", "", "The Dataset Viewer does not show these configs; load them with `datasets` as above:", "",
            *(f"- `{name}`: {cell(viewer.get('reason') or 'not viewable')}" for name, viewer in hidden), ""]


def _score_section(benchmark: str, state: dict) -> list[str]:
    bench = benchmarks.get(benchmark)
    if not bench.metrics:
        return []
    default = next((n for n, _ in _ordered(state["configs"])), "")
    split = _split_of(benchmark, state["configs"][default]) if default else bench.splits[-1]
    lines = ["## Score with perckit", "",
             "perckit's `evaluate` metrics score predictions against these rows. Each takes references made from a "
             "row by the helper named below (with perckit installed):", ""]
    for m in bench.metrics:
        fn = m.reference.__name__  # exported by the benchmark package, else by its features module
        module = f"perckit.{benchmark}" if fn in getattr(sys.modules[f"perckit.{benchmark}"], "__all__", ()) else f"perckit.{benchmark}.features"
        config = f', "{m.configs[0]}"' if m.configs else ""
        ref_args = f'row, "{m.configs[0]}"' if m.configs else "row"
        configs = f" Metric configs: {', '.join(f'`{x}`' for x in m.configs)}." if m.configs else ""
        scores, fmt = html.escape(m.scores or "the rows above", quote=False), html.escape(m.file_format, quote=False)
        lines += [f"### `{m.name}`", "", f"Scores: {scores}.{configs} Predictions: {fmt}.", "",
                  "```python", "import perckit", "from datasets import load_dataset", f"from {module} import {fn}", "",
                  f'ds = load_dataset("{REPO_PLACEHOLDER}", "{default}", split="{split}")']
        if any(c.get("parent") for c in state["configs"].values()):
            lines[-1:] = ["from huggingface_hub import snapshot_download", "from perckit.export import load_export", "",
                          "# media sit in a config of their own: join them back into the builder's rows",
                          f'local = snapshot_download("{REPO_PLACEHOLDER}", repo_type="dataset")',
                          f'ds = load_export(local, "{default}", split="{split}", benchmark="{benchmark}")']
        lines += [f'metric = perckit.load_metric("{m.name}"{config})  # or evaluate.load("metrics/{m.name}"{config}) in a perckit checkout',
                  f"references = [{fn}({ref_args}) for row in ds]",
                  "results = metric.compute(predictions=predictions, references=references)", "```", ""]
    return lines


def _licence_section(meta: dict, sections: dict, info: datasets.DatasetInfo) -> list[str]:
    if meta.get("license") == "other":
        licence = f"Licence: `other` ({meta.get('license_name')}); terms: {meta.get('license_link')}"
    else:
        licence = f"Licence: `{meta.get('license')}`."
    return ["## Licence", "", licence, "", sections["licence"] or (info.license or "").strip(), "",
            "This export holds data converted from the upstream release: check that its terms allow you to share "
            "it before you push it to a public repository.", ""]


def card_body(benchmark: str, info: datasets.DatasetInfo, state: dict) -> str:
    """The Markdown body of the export's card (see the module docstring)."""
    bench = benchmarks.get(benchmark)
    meta = builder_card_metadata(benchmark)
    sections = builder_card_sections(benchmark)
    lines = [f"# {meta['pretty_name']}", "",
             f"A Parquet export of **{bench.label}** made by `perckit convert` from the upstream release "
             f"[`{bench.hub_repo}`](https://huggingface.co/datasets/{bench.hub_repo}): typed columns, no loading script.", "",
             "## What the benchmark is", "", sections["about"] or (info.description or "").strip(), "",
             "## Configs", ""]
    lines += [*_config_table(benchmark, state), *_preview_section(benchmark, state), *_viewer_section(state),
              *_load_section(benchmark, state), *_rle_section(state), *_score_section(benchmark, state)]
    citation = sections["citation"] or (info.citation or "").strip()
    if citation:
        lines += ["## Citation", "", citation, ""]
    lines += _licence_section(meta, sections, info)
    lines += [f"Generated from the builder's own information (`builders/{benchmark}`) by `perckit convert`.", ""]
    return "\n".join(lines)


def card_text(benchmark: str, info: datasets.DatasetInfo, state: dict) -> str:
    """The whole ``README.md``: YAML front matter, then :func:`card_body`."""
    return f"---\n{_card_data(benchmark, state).to_yaml()}\n---\n\n" + card_body(benchmark, info, state)


# ------------------------------------------------------------------------------------- reading a card back


@dataclass(frozen=True)
class CardConfig:
    """One entry of an export card's YAML ``configs`` as :func:`read_card_configs` checked it: the name, whether it
    is the default, and per split its ``data_files`` paths or patterns, each with the card field it came from."""

    name: str
    default: bool
    data_files: dict[str, list[tuple[str, str]]]


def field_error(where: str, expected: str, got: Any, limit: int = 200) -> ReleaseFormatError:
    """The error of a bad field of an export's card (or record: :mod:`perckit.export.state`), ``got`` cut to ``limit``."""
    return ReleaseFormatError(f"{where}: expected {expected}, got {short_repr(got, limit)}")


def _card_pattern(value: Any, where: str) -> tuple[str, str]:
    """A ``data_files`` path or pattern, checked lexically: a relative path inside the export folder."""
    if isinstance(value, str) and "://" in value:
        raise field_error(where, "a path inside the export folder", value)  # a URL: never fetched
    check_relative(value, where, ReleaseFormatError, "the export folder")
    return value, where


def _card_data_files(value: Any, where: str) -> dict[str, list[tuple[str, str]]]:
    """``data_files`` in the forms datasets reads from a card: a string or a list of strings (the ``train``
    split), or a list of ``{split, path}`` with ``path`` a string or a list of strings."""
    if isinstance(value, str):
        return {"train": [_card_pattern(value, where)]}
    if not isinstance(value, list) or not value:
        raise field_error(where, "a path, a list of paths or a list of {split, path}", value)
    if len(value) > MAX_CARD_ENTRIES:
        raise field_error(where, f"at most {MAX_CARD_ENTRIES} entries", f"{len(value)} entries")
    if all(isinstance(v, str) for v in value):
        return {"train": [_card_pattern(v, f"{where}[{j}]") for j, v in enumerate(value)]}
    out: dict[str, list[tuple[str, str]]] = {}
    count = 0
    for j, item in enumerate(value):
        at = f"{where}[{j}]"
        if not isinstance(item, dict) or set(item) != {"split", "path"}:
            raise field_error(at, "{split, path} (every entry of the list in the same form)",
                              sorted(map(str, item)) if isinstance(item, dict) else item)
        split = item["split"]
        if not isinstance(split, str) or not SPLIT_NAME.match(split) or split in out:
            raise field_error(f"{at}.split", "a split name (letters, digits, '_'), once per config", split)
        paths = item["path"]
        if isinstance(paths, str):
            out[split] = [_card_pattern(paths, f"{at}.path")]
        elif isinstance(paths, list) and paths:
            count += len(paths)
            if count > MAX_CARD_ENTRIES:
                raise field_error(f"{at}.path", f"at most {MAX_CARD_ENTRIES} paths in a config", f"{count} paths")
            out[split] = [_card_pattern(p, f"{at}.path[{k}]") for k, p in enumerate(paths)]
        else:
            raise field_error(f"{at}.path", "a path or a non-empty list of paths", paths)
    return out


def read_card_configs(export_dir: str | os.PathLike) -> dict[str, CardConfig] | None:
    """The YAML ``configs`` of the card ``<export_dir>/README.md`` (what ``datasets.load_dataset(folder)`` would
    follow), checked: ``None`` when there is no card, ``{}`` when it has no front matter or no ``configs``.

    The card is untrusted (a Hub copy has no record; anyone can edit a card): it must be a regular file inside
    the export folder of at most :data:`MAX_CARD_BYTES`, UTF-8, its front matter a YAML mapping (safe loader);
    ``configs`` a list of mappings with a ``config_name`` (default ``default``; once each, of the record's name rule:
    letters, digits, ``_``, ``.``, ``-``, so no path reaches ``datasets``' cache names), an optional boolean
    ``default`` (at most one), no ``data_dir``, and ``data_files`` (see :func:`_card_data_files`) whose every
    path or pattern is relative and stays inside the folder lexically (no ``..``, no absolute path or drive
    letter, no URL; at most :data:`MAX_CARD_ENTRIES`). What the patterns match is resolved later
    (:meth:`perckit.export.state.ExportLayout.files`). Errors: :class:`~perckit.errors.ReleaseFormatError`
    naming the card and the field, e.g. ``'<export>/README.md' configs[0].data_files[1].path: expected a path
    inside the export folder, got '../elsewhere/private.parquet' (a '..' component leaves it)``."""
    root = Path(export_dir)
    path = root / "README.md"
    where = repr(str(path))
    if not os.path.lexists(path):
        return None
    resolve_under(root, "README.md", where, ReleaseFormatError, "the export folder")  # a link out of the export
    m = _FRONT_MATTER.match(_read_text(path, where))
    if not m:
        return {}
    configs = _front_matter(m.group(1), where).get("configs")
    if configs is None:
        return {}
    if not isinstance(configs, list):
        raise field_error(f"{where} configs", "a list of {config_name, data_files}", configs)
    out: dict[str, CardConfig] = {}
    for i, c in enumerate(configs):
        at = f"{where} configs[{i}]"
        if not isinstance(c, dict):
            raise field_error(at, "a mapping {config_name, data_files}", c)
        name = c.get("config_name", "default")
        if not isinstance(name, str) or not CONFIG_NAME.match(name) or name in out:
            raise field_error(f"{at}.config_name", "a config name of letters, digits, '_', '.', '-' (at most 128), once per "
                                                   "card", name)
        default = c.get("default", False)
        if not isinstance(default, bool):
            raise field_error(f"{at}.default", "true or false", default)
        if "data_dir" in c:
            raise field_error(f"{at}.data_dir", "no data_dir (an export names its files by data_files, relative to "
                                                "the export folder)", c["data_dir"])
        if "data_files" not in c:
            raise field_error(at, "'data_files' naming the config's files", sorted(map(str, c)))
        out[name] = CardConfig(name, default, _card_data_files(c["data_files"], f"{at}.data_files"))
    defaults = [n for n, c in out.items() if c.default]
    if len(defaults) > 1:
        raise field_error(f"{where} configs", "at most one default config", defaults)
    return out


def write_card(folder: Path, benchmark: str, info: datasets.DatasetInfo, state: dict) -> None:
    """``folder/README.md``: the card of the export whose record is ``state`` (:func:`card_text`)."""
    from huggingface_hub import DatasetCard

    write_atomic(Path(folder) / "README.md", str(DatasetCard(card_text(benchmark, info, state))))
