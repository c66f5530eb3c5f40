"""Synthetic RefCOCO-M release mirroring the real layout and its quirks.

Writes ``data/validation-0000K-of-0000N.parquet`` (one row per image) with exactly the Arrow
schema of the published card's ``dataset_info``: the ``image`` struct (``bytes``, ``path`` =
``images/<file_name>``), ``image_id``, ``file_name`` and the ``samples`` list whose ``mask``
struct keeps the release's field order (``counts``, ``size``), with ``size`` and ``bbox`` as
variable-length lists. Also ``README.md`` with the card's YAML (``dataset_info``, ``configs``).

Quirks reproduced: JPEG images of varied sizes, several samples per image and several sentences
per sample, one sentence text repeated under two samples of one image, one sample with an empty
``sentences`` list, COCO 2014 file names and real COCO category / supercategory names.
``num_images`` scales the release up for benchmarks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .. import rle as rle_ops
from ..io.paths import atomic_file
from .base import ReleaseWriter, SampleRelease, ellipse_mask, jpeg_bytes, rect_mask

#: (category, supercategory) pairs of COCO.
CATEGORIES = [
    ("person", "person"), ("dog", "animal"), ("cat", "animal"), ("horse", "animal"), ("elephant", "animal"),
    ("giraffe", "animal"), ("car", "vehicle"), ("bus", "vehicle"), ("motorcycle", "vehicle"), ("chair", "furniture"),
    ("couch", "furniture"), ("bowl", "kitchen"), ("cup", "kitchen"), ("pizza", "food"), ("banana", "food"),
    ("teddy bear", "indoor"), ("umbrella", "accessory"), ("tv", "electronic"),
]
PLACES = ["left", "right", "middle", "front", "back", "top", "bottom"]
TEMPLATES = [
    "{cat} on the {place}", "the {place} {cat}", "{place} {cat}", "{cat} in the {place}",
    "the {cat} closest to the {place}", "{place}most {cat}",
]
#: The sentence that appears under two samples of the first image.
SHARED_SENTENCE = "the one on the left"
FIRST_IMAGE_ID = 100_000
FIRST_SAMPLE_ID = 1_700_000


@dataclass
class RefCocoMSampleRelease(SampleRelease):
    image_ids: list[int]
    sample_ids: list[int]
    expression_ids: list[str]
    shards: list[str]
    #: Sample ids whose ``sentences`` list is empty (they yield no expression row).
    empty_sentence_sample_ids: list[int]
    #: (sample id, sample id) of the two samples that share :data:`SHARED_SENTENCE`.
    shared_sentence_sample_ids: tuple[int, int]
    sizes_hw: dict[int, tuple[int, int]]


def arrow_schema():
    """The release's Arrow schema, field for field (as ``datasets`` writes the card's ``dataset_info``)."""
    import pyarrow as pa

    sample = pa.struct([
        ("id", pa.int64()),
        ("image_id", pa.int64()),
        ("category", pa.string()),
        ("supercategory", pa.string()),
        ("label", pa.string()),
        ("sentences", pa.list_(pa.string())),
        ("bbox", pa.list_(pa.float32())),
        ("mask", pa.struct([("counts", pa.string()), ("size", pa.list_(pa.int32()))])),
    ])
    return pa.schema([
        ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
        ("image_id", pa.int64()),
        ("file_name", pa.string()),
        ("samples", pa.list_(sample)),
    ])


def write_shard(path: str | Path, rows: Sequence[dict], schema: Any = None) -> Path:
    """Write release rows (dicts as the Parquet holds them) to one Parquet shard."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(list(rows), schema=schema if schema is not None else arrow_schema())
    with atomic_file(path) as f:
        pq.write_table(table, f, row_group_size=100)
    return path


def shard_name(k: int, n: int) -> str:
    return f"data/validation-{k:05d}-of-{n:05d}.parquet"


def _sentence(rng: np.random.Generator, category: str, used: set[str]) -> str:
    for _ in range(20):
        s = TEMPLATES[rng.integers(len(TEMPLATES))].format(cat=category, place=PLACES[rng.integers(len(PLACES))])
        if s not in used:
            return s
    return f"{category} number {len(used)}"


def _mask(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    bh, bw = int(rng.integers(2, max(3, h // 2 + 1))), int(rng.integers(2, max(3, w // 2 + 1)))
    y0, x0 = int(rng.integers(0, h - bh + 1)), int(rng.integers(0, w - bw + 1))
    box = [x0, y0, x0 + bw, y0 + bh]
    m = ellipse_mask(h, w, box) if rng.integers(2) else rect_mask(h, w, box)
    if not m.any():
        m[y0, x0] = True
    return m


def card_features(fields: Any, pad: str = "  ") -> list[str]:
    """The card's ``dataset_info.features`` lines of Arrow ``fields`` (those of :func:`arrow_schema`, so the card and
    the shards have the one schema; the ``image`` struct is ``dtype: image``, a float32 ``float32``)."""
    import pyarrow as pa

    lines = []
    for f in fields:
        kind = "struct" if pa.types.is_struct(f.type) else "list" if pa.types.is_list(f.type) else "dtype"
        inner = f.type.value_type if kind == "list" else f.type
        lines.append(f"{pad}- name: {f.name}")
        if f.name == "image":
            lines.append(f"{pad}  dtype: image")
        elif pa.types.is_struct(inner):
            lines += [f"{pad}  {kind}:", *card_features(list(inner), pad + "  ")]
        else:
            lines.append(f"{pad}  {kind}: {'float32' if inner == pa.float32() else inner}")
    return lines


def card_yaml(num_examples: int, num_bytes: int) -> str:
    """The YAML header of the release card (``dataset_info`` features and the ``default`` config)."""
    features = "\n".join(card_features(arrow_schema()))
    return f"""---
dataset_info:
  features:
{features}
  splits:
  - name: validation
    num_bytes: {num_bytes}
    num_examples: {num_examples}
  download_size: {num_bytes}
  dataset_size: {num_bytes}
configs:
- config_name: default
  data_files:
  - split: validation
    path: data/validation-*
license: mit
language:
- en
pretty_name: RefCOCO-M
size_categories:
- 1K<n<10K
---
"""


def write_release(root: str | Path, seed: int = 0, num_images: int = 12, shards: int = 2,
                  min_size: tuple[int, int] = (24, 32), max_size: tuple[int, int] = (48, 64), max_samples: int = 3,
                  max_sentences: int = 4) -> RefCocoMSampleRelease:
    """Write the release under ``root``: ``num_images`` rows split into ``shards`` contiguous Parquet shards.

    Image sizes ([H, W]) are drawn between ``min_size`` and ``max_size``; each image has 1 to
    ``max_samples`` samples with 1 to ``max_sentences`` sentences. For a benchmark-sized release
    use e.g. ``num_images=1190, min_size=(360, 480), max_size=(480, 640)``.
    """
    if num_images < 3:
        raise ValueError(f"num_images: expected at least 3 (the sample release's quirks need three images), got {num_images}")
    if not 1 <= shards <= num_images:
        raise ValueError(f"shards: expected 1 <= shards <= num_images ({num_images}), got {shards}")
    wr = ReleaseWriter(root, seed)
    rng = wr.rng
    rows: list[dict] = []
    sample_id = FIRST_SAMPLE_ID
    for i in range(num_images):
        image_id = FIRST_IMAGE_ID + 37 * i + int(rng.integers(0, 30))
        h = int(rng.integers(min_size[0], max_size[0] + 1))
        w = int(rng.integers(min_size[1], max_size[1] + 1))
        file_name = f"COCO_train2014_{image_id:012d}.jpg"
        img = rng.integers(0, 255, size=(h, w, 3), dtype=np.uint8)
        n_samples = 2 if i == 0 else int(rng.integers(1, max_samples + 1))
        samples, used = [], set()
        for j in range(n_samples):
            category, supercategory = CATEGORIES[int(rng.integers(len(CATEGORIES)))]
            m = _mask(rng, h, w)
            img[m] = (img[m] // 4 + 60 * (j + 1)) % 255
            mask = rle_ops.encode(m)
            n_sent = int(rng.integers(1, max_sentences + 1))
            sentences = [_sentence(rng, category, used) for _ in range(n_sent)]
            used.update(sentences)
            if i == 0:
                sentences.insert(1 if j == 0 else 0, SHARED_SENTENCE)
            if i == 2 and j == n_samples - 1:
                sentences = []
            samples.append({
                "id": sample_id + int(rng.integers(1, 50)),
                "image_id": image_id,
                "category": category,
                "supercategory": supercategory,
                "label": category,
                "sentences": sentences,
                "bbox": rle_ops.to_bbox(mask),
                "mask": {"counts": mask["counts"], "size": mask["size"]},
            })
            sample_id = samples[-1]["id"]
        rows.append({
            "image": {"bytes": jpeg_bytes(img), "path": f"images/{file_name}"},
            "image_id": image_id,
            "file_name": file_name,
            "samples": samples,
        })
    names = [shard_name(k, shards) for k in range(shards)]
    bounds = np.linspace(0, num_images, shards + 1).round().astype(int)
    for k, name in enumerate(names):
        write_shard(wr.path(name), rows[bounds[k] : bounds[k + 1]])
    num_bytes = sum((wr.root / n).stat().st_size for n in names)
    wr.text("README.md", card_yaml(num_images, num_bytes) + (
        "\n# RefCOCO-M (synthetic sample release)\n\nA small synthetic stand-in for moondream/refcoco-m written by "
        "perckit.samples.refcoco_m: the same Parquet schema and layout, random images and masks.\n"
    ))
    samples = [s for r in rows for s in r["samples"]]
    return RefCocoMSampleRelease(
        root=wr.root,
        image_ids=[r["image_id"] for r in rows],
        sample_ids=[s["id"] for s in samples],
        expression_ids=[f"{s['id']}:{k}" for s in samples for k in range(len(s["sentences"]))],
        shards=names,
        empty_sentence_sample_ids=[s["id"] for s in samples if not s["sentences"]],
        shared_sentence_sample_ids=tuple(s["id"] for s in rows[0]["samples"][:2]),
        sizes_hw={r["image_id"]: tuple(r["samples"][0]["mask"]["size"]) for r in rows},
        files=list(wr.files),
    )
