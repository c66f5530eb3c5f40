"""Synthetic M⁴Seg release mirroring the real layout, formats and quirks (any train size, streamed to disk).

Written under ``root``:

- ``data/{train,test}-NNNNN-of-NNNNN.parquet``: the Hub layout, one example per row (card field names);
- ``annotations/m4seg_{train,test}.json.gz``: the native format (``groundings.img_1``, ``img_2``, ...,
  ``image_paths``, ``image_sizes``), no ``example_id``;
- ``dataset_summary.json``, ``metadata/image_manifest.jsonl.gz``, ``metadata/ade20k_part234_classes.json``,
  ``metadata/source_catalogs/*/*.json.gz``, ``prepare_images.py``, ``PREPARATION.md``, ``LICENSE.md`` (not read).

Quirks reproduced: entity-code answers with 3-digit object and 5-digit part codes (first digit = image), repeated
mentions of a code, codes with underscores in the name part (``dining_table_101``); repeated ``pair_id`` values in
train (``example_id`` = ``pair_id`` or ``pair_id#k``); object and part granularity by source; ADE20K object and
ADE20KPart234 images with the same file names under different roots; the native file's per-source spellings
(``q``/``question``, ``label``/``category``, ``ann_id``/``annotation_id``/``id``, ``segmentation``/``mask``), int
pair and annotation ids, ``answer_span`` missing for some sources (the builder derives it), PASCAL ``image_sizes``
given as ``[W, H]``, COCO rectangle masks as polygons and PASCAL masks as uncompressed RLE; combined groundings with
two annotation ids; images without groundings."""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from .. import rle as rle_ops
from ..io.paths import write_atomic
from .base import ReleaseWriter, SampleRelease, ellipse_mask, jpeg_bytes, rect_mask, rect_polygon, uncompressed_rle

#: source -> (granularity, image folder per split, file-name pattern)
SOURCES = {
    "ade20k_part234": ("part", "Part_Segm/ADE20KPart234/images/{sub}", "ADE_{tag}_{n:08d}.jpg"),
    "ade20k_objects": ("object", "Semantic_Segm/ade20k_instances/images/{sub}", "ADE_{tag}_{n:08d}.jpg"),
    "paco_lvis": ("part", "coco_2017/{coco}", "{n:012d}.jpg"),
    "coco_objects": ("object", "coco_2017/{coco}", "{n:012d}.jpg"),
    "pascal_part": ("part", "Part_Segm/PASCAL-Part/VOCdevkit/VOC2010/JPEGImages", "2008_{n:06d}.jpg"),
    "pascal_objects": ("object", "Part_Segm/PASCAL-Part/VOCdevkit/VOC2010/JPEGImages", "2008_{n:06d}.jpg"),
}
SOURCE_NAMES = tuple(SOURCES)
TYPES = ("functional", "spatial", "open-ended", "counting")
#: (H, W) of the synthetic images; small so a 200k-row train split writes fast.
SIZES = ((16, 24), (24, 16), (20, 20), (12, 24))
OBJECTS = ("chair", "dining table", "cup", "person", "dog", "bottle", "car", "potted plant", "bed", "cat", "bus", "bicycle")
PARTS = {
    "chair": ("leg", "seat", "back"), "dog": ("head", "leg", "tail"), "person": ("head", "hand", "arm", "torso"),
    "car": ("wheel", "door", "window"), "bottle": ("cap", "body", "neck"), "bicycle": ("wheel", "saddle", "handlebar"),
    "cat": ("ear", "tail", "paw"), "bus": ("door", "wheel", "window"), "dining table": ("leg", "top"),
    "cup": ("handle", "rim"), "bed": ("headboard", "leg"), "potted plant": ("pot", "leaf"),
}
PHRASES = (
    "The {c} is the one to use.", "Look at the {c} here.", "{c} is closest to the viewer.",
    "It rests near the {c}.", "Only the {c} fits the description.", "The {c} is partly hidden.",
)
QUESTIONS = {
    "functional": "Which parts across these images could someone use to sit or hold something?",
    "spatial": "Across the images, which object is left of the {n}?",
    "open-ended": "What do these images have in common?",
    "counting": "How many objects like the {n} appear across the images?",
}
#: Native spellings per source family [inferred quirks the builder's alias tables must absorb].
NATIVE_STYLE = {
    "coco": {"q": "q", "a": "a", "type": "type", "ds": "dataset_name", "name": "name", "ann": "annotation_id", "obj": "object_id", "seg": "segmentation"},
    "ade": {"q": "question", "a": "answer", "type": "question_type", "ds": "dataset", "name": "label", "ann": "ann_id", "obj": "object_annotation_id", "seg": "mask"},
    "pascal": {"q": "q", "a": "a", "type": "type", "ds": "source", "name": "category", "ann": "id", "obj": "object_id", "seg": "segmentation"},
}


def _family(source: str) -> str:
    return "coco" if source in ("coco_objects", "paco_lvis") else "ade" if source.startswith("ade20k") else "pascal"


@dataclass
class M4SegSampleRelease(SampleRelease):
    train_ids: list[str]
    test_ids: list[str]
    num_groundings: dict[str, int]
    image_root: Path | None = None


def _mask_pool(rng: np.random.Generator, per_size: int = 48) -> dict[tuple[int, int], list[dict]]:
    """Pre-encoded masks per image size (RLE, bbox, uncompressed counts, polygon of rectangles)."""
    pool: dict[tuple[int, int], list[dict]] = {}
    for h, w in SIZES:
        items = pool[(h, w)] = []
        for i in range(per_size):
            x0, y0 = int(rng.integers(0, w - 2)), int(rng.integers(0, h - 2))
            x1, y1 = int(rng.integers(x0 + 1, w + 1)), int(rng.integers(y0 + 1, h + 1))
            rect = i % 3 != 2
            m = rect_mask(h, w, [x0, y0, x1, y1]) if rect else ellipse_mask(h, w, [x0, y0, max(x1, x0 + 2), max(y1, y0 + 2)])
            if not m.any():
                m = rect_mask(h, w, [x0, y0, x0 + 1, y0 + 1])
                rect = True
                x1, y1 = x0 + 1, y0 + 1
            r = rle_ops.encode(m)
            items.append({
                "rle": r, "bbox": rle_ops.to_bbox(r), "uncompressed": uncompressed_rle(r),
                "polygon": [rect_polygon([x0, y0, x1, y1])] if rect else None,
            })
    return pool


def _image(source: str, split: str, n: int) -> dict:
    gran, folder, pattern = SOURCES[source]
    train = split == "train"
    folder = folder.format(sub="training" if train else "validation", coco="train2017" if train else "val2017")
    name = pattern.format(tag="train" if train else "val", n=n)
    h, w = SIZES[n % len(SIZES)]
    return {"image_id": Path(name).stem, "path": f"{folder}/{name}", "height": h, "width": w}


def image_pool_size(rows: int) -> int:
    """Images per source a split draws from (images repeat across examples, as in the real release)."""
    return int(min(max(16, rows // 2), 20_000))


def _example(rng: np.random.Generator, pool: dict, split: str, source: str, pair_num: int, qtype: str, n_pool: int) -> tuple[dict, dict]:
    """One example as (Parquet row without example_id, native example without example_id)."""
    gran = SOURCES[source][0]
    n_images = 2 if rng.random() < 0.6 else 3
    nums: list[int] = []
    while len(nums) < n_images:
        v = int(rng.integers(0, n_pool))
        if v not in nums:
            nums.append(v)
    images = [_image(source, split, v) for v in nums]
    # entities per image: (code, name, mask item, annotation ids, object annotation id)
    mentions: list[tuple[int, str]] = []
    per_image: dict[int, list[dict]] = {}
    ann_base = int(rng.integers(1, 900_000)) * 10
    for k in range(1, n_images + 1):
        h, w = images[k - 1]["height"], images[k - 1]["width"]
        count = int(rng.choice([1, 1, 2, 2, 3])) if (k == 1 or source.startswith("pascal") or rng.random() < 0.9) else 0
        ents = []
        obj_counter = 0
        for _ in range(count):
            obj = OBJECTS[int(rng.integers(len(OBJECTS)))]
            obj_counter += 1
            parent = ann = ann_base + k * 100 + obj_counter
            if gran == "part" and rng.random() < 0.6:
                parts = PARTS[obj]
                p = int(rng.integers(len(parts)))
                name = parts[p]
                code = f"{name.replace(' ', '_')}_{k}{obj_counter:02d}{p + 1:02d}"
                ann_ids = [ann * 10 + p + 1]
            else:
                name = obj
                code = f"{name.replace(' ', '_')}_{k}{obj_counter:02d}"
                ann_ids = [ann] if rng.random() < 0.9 else [ann, ann + 50]  # a combined grounding
            item = pool[(h, w)][int(rng.integers(len(pool[(h, w)])))]
            ents.append({"code": code, "name": name, "mask": item, "ann_ids": ann_ids, "parent": parent})
            mentions.append((k, code))
        per_image[k] = ents
    # Answer: mentions in a shuffled order across images; some codes are mentioned twice.
    order = [mentions[i] for i in rng.permutation(len(mentions))]
    if order and rng.random() < 0.25:
        order.append(order[int(rng.integers(len(order)))])
    answer, first_span = "", {}
    for k, code in order:
        pre, post = PHRASES[int(rng.integers(len(PHRASES)))].split("{c}")
        answer += (" " if answer else "") + pre
        if code not in first_span:
            first_span[code] = [len(answer), len(answer) + len(code)]
        answer += code + post
    # Groundings of each image in first-mention order.
    firsts: dict[str, int] = {}
    for i, (_, code) in enumerate(order):
        firsts.setdefault(code, i)
    for k in per_image:
        per_image[k].sort(key=lambda e: firsts[e["code"]])
    question = QUESTIONS[qtype].format(n=next((e["name"] for k in per_image for e in per_image[k]), "object"))
    pair_id = f"{source[:3]}_{pair_num:07d}" if _family(source) != "coco" else pair_num

    groundings = []
    for k in sorted(per_image):
        for e in per_image[k]:
            groundings.append({
                "image_index": k, "name": e["name"], "annotation_ids": [str(a) for a in e["ann_ids"]],
                "object_annotation_id": None if source == "ade20k_objects" else str(e["parent"]),
                "answer_span": first_span[e["code"]], "bbox": e["mask"]["bbox"], "segmentation": e["mask"]["rle"],
            })
    row = {
        "pair_id": str(pair_id), "dataset_name": source, "type": qtype, "granularity": gran,
        "q": question, "a": answer, "images": images, "groundings": groundings,
    }

    fam = _family(source)
    st = NATIVE_STYLE[fam]
    native: dict[str, Any] = {"pair_id": pair_id, st["ds"]: source, st["type"]: qtype, st["q"]: question, st["a"]: answer}
    if fam != "ade":
        native["granularity"] = gran
    native["image_paths"] = [im["path"] for im in images]
    native["image_sizes"] = [[im["width"], im["height"]] if fam == "pascal" else [im["height"], im["width"]] for im in images]
    groups: dict[str, list] = {}
    for k in sorted(per_image):
        if not per_image[k] and rng.random() < 0.5:
            continue  # an image without groundings: no key at all, or an empty list
        out = []
        for e in per_image[k]:
            m = e["mask"]
            g: dict[str, Any] = {st["name"]: e["name"]}
            if len(e["ann_ids"]) > 1:
                g["annotation_ids"] = list(e["ann_ids"])
            else:
                g[st["ann"]] = e["ann_ids"][0] if fam != "ade" else str(e["ann_ids"][0])
            if source != "ade20k_objects":
                g[st["obj"]] = e["parent"]
            bx = m["bbox"]
            g["bbox"] = [bx[0], bx[1], bx[0] + bx[2], bx[1] + bx[3]]  # the original xyxy box, not kept
            polygon = fam == "coco" and m["polygon"] is not None
            g[st["seg"]] = m["polygon"] if polygon else m["uncompressed"] if fam == "pascal" else m["rle"]
            if fam == "coco":
                g["answer_span"] = first_span[e["code"]]
            out.append(g)
        groups[f"img_{k}"] = out
    native["groundings"] = groups
    return row, native


def _parquet_schema():
    import pyarrow as pa

    rle = pa.struct([("size", pa.list_(pa.int64())), ("counts", pa.string())])
    image = pa.struct([("image_id", pa.string()), ("path", pa.string()), ("height", pa.int64()), ("width", pa.int64())])
    grounding = pa.struct([
        ("image_index", pa.int64()), ("name", pa.string()), ("annotation_ids", pa.list_(pa.string())),
        ("object_annotation_id", pa.string()), ("answer_span", pa.list_(pa.int64())), ("bbox", pa.list_(pa.float64())),
        ("segmentation", rle),
    ])
    return pa.schema([
        ("example_id", pa.string()), ("pair_id", pa.string()), ("dataset_name", pa.string()), ("type", pa.string()),
        ("granularity", pa.string()), ("q", pa.string()), ("a", pa.string()), ("images", pa.list_(image)),
        ("groundings", pa.list_(grounding)),
    ])


#: Rows per Parquet row group (the writer's ``row_group_size``), for the generated and the tiled splits alike.
ROW_GROUP_SIZE = 1000


def _parquet_shards(wr: ReleaseWriter, split: str, rows: int, shards: int,
                    schema: Any) -> Iterator[tuple[int, int, Any]]:
    """The split's Parquet shards, one after the other: ``(lo, hi, writer)`` for rows ``[lo, hi)`` of each."""
    import pyarrow.parquet as pq

    shards = max(1, min(shards, rows)) if rows else 1
    per_shard = math.ceil(rows / shards) if rows else 0
    for s in range(shards):
        with wr.open(f"data/{split}-{s:05d}-of-{shards:05d}.parquet") as raw, pq.ParquetWriter(raw, schema) as pw:
            yield s * per_shard, min(rows, (s + 1) * per_shard), pw


def _pair_plan(rng: np.random.Generator, split: str, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pair numbers, sources and example-id occurrences (-1: unique) for a split; train repeats some pair ids."""
    offset = 0 if split == "test" else 5_000_000
    nums = np.arange(rows, dtype=np.int64) + offset
    src = rng.integers(0, len(SOURCE_NAMES), size=rows)
    if split == "train" and rows > 4:
        rep = np.flatnonzero(rng.random(rows) < 0.06)
        rep = rep[rep > 0]
        prev = (rng.random(rep.size) * rep).astype(np.int64)
        if rows > 6:  # always some repeats: rows 3 and 5 repeat row 1 (three occurrences of one pair id)
            keep = ~np.isin(rep, [3, 5])
            rep = np.concatenate(([3, 5], rep[keep]))
            prev = np.concatenate(([1, 1], prev[keep]))
            order = np.argsort(rep, kind="stable")
            rep, prev = rep[order], prev[order]
        for i, j in zip(rep, prev):  # in order, so chains of repeats resolve to the earliest pair
            nums[i] = nums[j]
            src[i] = src[j]
    occ = np.full(rows, -1, dtype=np.int64)
    _, inverse, counts = np.unique(nums, return_inverse=True, return_counts=True)
    seen: dict[int, int] = {}
    for i in np.flatnonzero(counts[inverse] > 1):
        k = int(inverse[i])
        occ[i] = seen.get(k, 0)
        seen[k] = occ[i] + 1
    return nums, src, occ


def _write_split(wr: ReleaseWriter, split: str, rows: int, shards: int, pool: dict, chunk: int = 2000,
                 sizes: dict[str, tuple[int, int]] | None = None) -> tuple[list[str], int, dict]:
    """A split as generated; ``sizes``: filled with ``{image path: (H, W)}`` of every image it references."""
    import pyarrow as pa

    rng = wr.rng
    nums, src, occ = _pair_plan(rng, split, rows)
    types = rng.integers(0, len(TYPES), size=rows)
    n_pool = image_pool_size(rows)
    schema = _parquet_schema()
    ids: list[str] = []
    n_groundings = 0
    by_source: dict[str, int] = {}
    with wr.open(f"annotations/m4seg_{split}.json.gz") as raw, gzip.open(raw, "wt", encoding="utf-8", compresslevel=1) as nat:
        nat.write("[")
        for lo, hi, pw in _parquet_shards(wr, split, rows, shards, schema):
            for c0 in range(lo, hi, chunk):
                batch = []
                for i in range(c0, min(hi, c0 + chunk)):
                    source = SOURCE_NAMES[int(src[i])]
                    row, native = _example(rng, pool, split, source, int(nums[i]), TYPES[int(types[i])], n_pool)
                    eid = row["pair_id"] if occ[i] < 0 else f"{row['pair_id']}#{int(occ[i])}"
                    batch.append({"example_id": eid, **row})
                    ids.append(eid)
                    n_groundings += len(row["groundings"])
                    by_source[source] = by_source.get(source, 0) + 1
                    if sizes is not None:
                        sizes.update({im["path"]: (im["height"], im["width"]) for im in row["images"]})
                    if i:
                        nat.write(",\n")
                    nat.write(json.dumps(native, separators=(",", ":")))
                if batch:
                    pw.write_table(pa.Table.from_pylist(batch, schema=schema), row_group_size=ROW_GROUP_SIZE)
        nat.write("]\n")
    return ids, n_groundings, by_source


#: Permutations of the block a tiled split cycles through (each one Arrow ``take`` of the block table).
TILE_PERMUTATIONS = 4


def _write_tiled_split(wr: ReleaseWriter, split: str, rows: int, shards: int, pool: dict, block: int) -> tuple[list[str], int, dict]:
    """A large split written fast: ``block`` examples generated once (as :func:`_write_split` does), then row
    ``i`` is row ``i % block`` of permutation ``(i // block) % TILE_PERMUTATIONS`` of the block (so masks,
    texts and groundings are drawn from the block) with a fresh, unique pair id (``example_id`` = ``pair_id``;
    no repeated pair ids). Parquet is written from slices of the permuted block tables, the native file by
    splicing the new pair id in front of the block example's serialised JSON (``pair_id`` is its first key);
    the two files are written by two threads (Parquet encoding and zlib release the GIL), so 743k rows take
    seconds. Shards of ``ROW_GROUP_SIZE``-row groups, as :func:`_write_split`."""
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow as pa

    rng = wr.rng
    offset = 10_000_000 if split == "train" else 20_000_000  # past every number _pair_plan uses
    src = rng.integers(0, len(SOURCE_NAMES), size=block)
    types = rng.integers(0, len(TYPES), size=block)
    n_pool = image_pool_size(block)
    schema = _parquet_schema()
    batch, tails, n_ground = [], [], []
    for j in range(block):
        source = SOURCE_NAMES[int(src[j])]
        row, native = _example(rng, pool, split, source, j, TYPES[int(types[j])], n_pool)
        batch.append({"example_id": row["pair_id"], **row})
        text = json.dumps(native, separators=(",", ":"))
        head = '{"pair_id":' + json.dumps(native["pair_id"]) + ","
        if not text.startswith(head):  # _example puts pair_id first; anything else is a writer bug
            raise RuntimeError(f"tiled M4Seg writer: the native example does not start with its pair_id ({text[:40]!r})")
        tails.append(text[len(head):])
        n_ground.append(len(row["groundings"]))
    table = pa.Table.from_pylist(batch, schema=schema)
    perms = [rng.permutation(block) for _ in range(TILE_PERMUTATIONS)]
    tables = [table.take(pa.array(p)).combine_chunks() for p in perms]
    # row i -> block row order[i]
    order = np.concatenate(perms * (rows // (block * len(perms)) + 1))[:rows] if rows else np.empty(0, dtype=np.int64)
    coco = np.array([_family(SOURCE_NAMES[int(v)]) == "coco" for v in src])
    prefix = [SOURCE_NAMES[int(v)][:3] for v in src]
    nums = (np.arange(rows, dtype=np.int64) + offset).tolist()
    ids = [str(n) if coco[j] else f"{prefix[j]}_{n:07d}" for j, n in zip(order.tolist(), nums)]
    n_groundings = int(np.asarray(n_ground, dtype=np.int64)[order].sum())
    values, counts = np.unique(src[order], return_counts=True)
    by_source = {SOURCE_NAMES[int(v)]: int(c) for v, c in zip(values, counts)}
    chunk = ROW_GROUP_SIZE * 10

    def slices(lo: int, hi: int) -> Iterator[tuple[int, int]]:
        """``[lo, hi)`` cut at the block boundaries (a slice of one permuted table each)."""
        while lo < hi:
            end = min(hi, (lo // block + 1) * block)
            yield lo, end
            lo = end

    def write_parquet() -> None:
        for lo, hi, pw in _parquet_shards(wr, split, rows, shards, schema):
            for c0 in range(lo, hi, chunk):
                c1 = min(hi, c0 + chunk)
                parts = [tables[(a // block) % len(tables)].slice(a % block, b - a) for a, b in slices(c0, c1)]
                part = pa.concat_tables(parts)
                pid = pa.array(ids[c0:c1], type=pa.string())
                pw.write_table(part.set_column(0, "example_id", pid).set_column(1, "pair_id", pid), row_group_size=ROW_GROUP_SIZE)

    with ThreadPoolExecutor(1, thread_name_prefix="m4seg-tiled-parquet") as executor:
        parquet = executor.submit(write_parquet)
        with wr.open(f"annotations/m4seg_{split}.json.gz") as raw, gzip.open(raw, "wb", compresslevel=1) as nat:
            nat.write(b"[")
            for c0 in range(0, rows, chunk):
                c1 = min(rows, c0 + chunk)
                text = ",\n".join(
                    '{"pair_id":' + (pid if coco[j] else '"' + pid + '"') + "," + tails[j]
                    for j, pid in zip(order[c0:c1].tolist(), ids[c0:c1])
                )
                nat.write(((",\n" if c0 else "") + text).encode("utf-8"))
            nat.write(b"]\n")
    parquet.result()  # the Parquet thread's error, if any, raised here
    return ids, n_groundings, by_source


def _manifest_lines(rows: dict[str, int]) -> Iterator[str]:
    """One line per image of each source's pool (the real manifest's content is not documented; not read)."""
    for split in ("train", "test"):
        for source in SOURCE_NAMES:
            for n in range(image_pool_size(rows[split])):
                im = _image(source, split, n)
                yield json.dumps({**im, "dataset_name": source, "split": split}, separators=(",", ":"))


def write_release(root: str | Path, seed: int = 0, train_rows: int = 48, test_rows: int = 24, shards: int = 3,
                  image_root: str | Path | None = None, write_manifest: bool = True,
                  tile_block: int | None = None) -> M4SegSampleRelease:
    """Write the release under ``root``: ``train_rows`` / ``test_rows`` examples, train Parquet in ``shards`` files.

    Everything is streamed to disk in chunks, so ``train_rows=200_000`` takes seconds of memory-flat work.
    ``image_root``: also write a small JPEG for every image the test split references, under that folder.
    ``tile_block``: when ``train_rows`` exceeds it, the train split is ``tile_block`` generated examples tiled to
    ``train_rows`` with fresh unique pair ids (:func:`_write_tiled_split`; no repeated pair ids): the real
    743,463-row size in seconds, for benchmarks. None (the default) writes every example as generated."""
    wr = ReleaseWriter(root, seed)
    pool = _mask_pool(wr.rng)
    if tile_block is not None and not (isinstance(tile_block, int) and tile_block >= 16):
        raise ValueError(f"tile_block: expected None or an int >= 16, got {tile_block!r}")
    if tile_block is not None and train_rows > tile_block:
        train_ids, n_train, src_train = _write_tiled_split(wr, "train", train_rows, shards, pool, tile_block)
    else:
        train_ids, n_train, src_train = _write_split(wr, "train", train_rows, shards, pool)
    test_sizes: dict[str, tuple[int, int]] = {}
    test_ids, n_test, src_test = _write_split(wr, "test", test_rows, 1, pool, sizes=test_sizes)
    wr.json("dataset_summary.json", {
        "dataset": "M4Seg (synthetic sample release)",
        "splits": {
            "train": {"examples": train_rows, "groundings": n_train, "dataset_name": dict(sorted(src_train.items()))},
            "test": {"examples": test_rows, "groundings": n_test, "dataset_name": dict(sorted(src_test.items()))},
        },
    })
    if write_manifest:
        with wr.open("metadata/image_manifest.jsonl.gz") as raw, gzip.open(raw, "wt", encoding="utf-8", compresslevel=1) as f:
            f.writelines(line + "\n" for line in _manifest_lines({"train": train_rows, "test": test_rows}))
    wr.json("metadata/ade20k_part234_classes.json", {"objects": list(OBJECTS), "parts": sorted({p for v in PARTS.values() for p in v})})
    with wr.open("metadata/source_catalogs/coco/instances_val2017.json.gz") as raw, gzip.open(raw, "wt", encoding="utf-8") as f:
        json.dump({"images": [], "annotations": [], "categories": [{"id": i + 1, "name": n} for i, n in enumerate(OBJECTS)]}, f)
    wr.text("prepare_images.py", "# Image preparation script of the release (not read by the builder).\n")
    wr.text("PREPARATION.md", "# Preparation\n\nSynthetic sample release: see the M4Seg dataset card for the real guide.\n")
    wr.text("LICENSE.md", "New annotations: CC BY 4.0. Inherited masks keep their upstream terms. Code: MIT.\n")
    img_root = None if image_root is None else Path(image_root)
    if img_root is not None:  # a small JPEG for every image the test split references
        for i, (rel, (h, w)) in enumerate(sorted(test_sizes.items())):
            (img_root / rel).parent.mkdir(parents=True, exist_ok=True)
            write_atomic(img_root / rel, jpeg_bytes(np.full((h, w, 3), ((i * 37) % 256, (i * 91) % 256, 128)), 80))
    return M4SegSampleRelease(Path(root), train_ids, test_ids, {"train": n_train, "test": n_test}, img_root,
                              files=sorted(wr.files))
