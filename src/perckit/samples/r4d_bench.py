"""Synthetic R4D-Bench release mirroring the real layout and its quirks.

Quirks reproduced: ``cook_spinach`` folder with ``cook-spinach`` query ids, scene JSON and meta ``scene``;
``split_cookie`` folder with ``split-cookie.json`` but ``split_cookie_q*`` ids; frame ids that start at 0, 1 or
later with gaps; Roboflow file names (``000012_png.rf.<hash>.jpg`` with ``extra.name``); one scene whose COCO file
is ``_annotations.test.coco.json``; track ids in ``track_id`` or ``attributes.track_id``, and one scene
(``cut_lemon``) whose COCO annotations carry none, so only its scene track JSON (``tracks[].annotation_ids``, the
[inferred] layout) links them; GT masks as polygons, compressed RLE and uncompressed (list-counts) RLE; multi-target
and negative queries with sentinel existence frames; one positive existence frame without a mask entry; non-string
optional metadata (``distractor: true``, an int anchor) and an unknown metadata key."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import rle as rle_ops
from .base import ReleaseWriter, SampleRelease, ellipse_mask, rect_mask, rect_polygon, uncompressed_rle

#: [3rd] queries per scene in the real 89-query set, by scene folder ([card]: underscores only), in the card's order.
REAL_QUERIES_PER_SCENE = {
    "americano": 10, "coffee_martini": 7, "cook_spinach": 7, "cut_lemon": 8, "cut_roasted_beef": 7, "espresso": 8,
    "flame_salmon": 7, "flame_steak": 7, "keyboard": 6, "sear_steak": 7, "split_cookie": 8, "torchchocolate": 7,
}
#: The 12 scene folders under ``data/scenes/``.
SCENES = tuple(REAL_QUERIES_PER_SCENE)
ID_PREFIX = {"cook_spinach": "cook-spinach"}  # query ids / meta scene use the hyphen spelling
TRACK_JSON = {"cook_spinach": "cook-spinach.json", "split_cookie": "split-cookie.json"}
COCO_NAME = {"keyboard": "_annotations.test.coco.json"}
#: Scenes whose COCO annotations carry no track-id attribute: the scene track JSON is the only link.
TRACKS_ONLY_IN_SCENE_JSON = ("cut_lemon",)
CATEGORIES = ["person", "cup", "knife", "hand", "plate", "bottle"]
TEXTS_EN = [
    "the cup on the left side of the picture", "the hand that picks up the knife after the pour",
    "the objects the person touches while cooking", "the bottle that moves to the right",
    "the plate before it is lifted",
]
TEXTS_ZH = ["画面左侧的杯子", "倒完之后拿起刀的那只手", "做饭时人接触的物体", "向右移动的瓶子", "被拿起之前的盘子"]


@dataclass
class R4DSampleRelease(SampleRelease):
    query_ids: list[str]
    subset_ids: list[str]
    negative_ids: list[str]
    frame_ids: dict[str, list[int]]
    size: tuple[int, int]


def _track_box(track: int, k: int, n: int, h: int, w: int) -> list[int]:
    """A box that moves across the frames; pixel aligned."""
    bw, bh = max(w // 4, 2), max(h // 3, 2)
    x0 = int(round((w - bw) * ((k + track) % max(n, 1)) / max(n, 1)))
    y0 = int((track * h) // 5) % max(h - bh, 1)
    return [x0, y0, x0 + bw, y0 + bh]


def write_release(root: str | Path, seed: int = 0, frames_per_scene: int = 4, height: int = 24, width: int = 32,
                  queries_per_scene: dict[str, int] | None = None, write_query_masks: bool = True,
                  write_images: bool = True) -> R4DSampleRelease:
    """Write the release under ``root``. Defaults give 12 scenes x 4 frames x 89 queries at 32x24."""
    wr = ReleaseWriter(root, seed)
    rng = wr.rng
    qps = dict(REAL_QUERIES_PER_SCENE if queries_per_scene is None else queries_per_scene)
    all_meta: list[dict] = []
    dense: tuple[list[dict], list[dict]] = ([], [])  # (entries, entries with mask paths)
    subset: tuple[list[dict], list[dict]] = ([], [])
    track_rows: list[list[Any]] = []
    frame_ids_by_scene: dict[str, list[int]] = {}
    negatives: list[str] = []
    n = frames_per_scene
    for si, scene in enumerate(SCENES):
        if scene not in qps:
            continue
        folder = f"data/scenes/{scene}"
        prefix = ID_PREFIX.get(scene, scene)
        start, step = [(0, 1), (1, 1), (30, 2)][si % 3]
        fids = [start + step * k for k in range(n)]
        frame_ids_by_scene[scene] = fids
        n_tracks = 3 + si % 2
        tracks = list(range(1, n_tracks + 1))
        # track t is visible on frames [t-1 .. n) (later tracks appear later); track 1 always.
        visible = {t: set(range(min(t - 1, n - 1), n)) for t in tracks}
        # --- COCO + images
        images, anns = [], []
        seg_of: dict[tuple[int, int], Any] = {}  # (track, k) -> GT segmentation
        ann_ids_of: dict[int, list[int]] = {t: [] for t in tracks}  # track -> its COCO annotation ids
        mask_of: dict[tuple[int, int], np.ndarray] = {}
        ann_id = 1
        for k, fid in enumerate(fids):
            digest = hashlib.sha1(f"{scene}{fid}".encode()).hexdigest()[:20]
            fname = f"{fid:06d}_png.rf.{digest}.jpg"
            img = (rng.integers(0, 255, size=(height, width, 3))).astype(np.uint8)
            for t in tracks:
                if k not in visible[t]:
                    continue
                box = _track_box(t, k, n, height, width)
                if t % 2:  # odd tracks: rectangles given as polygons
                    m = rect_mask(height, width, box)
                    seg: Any = [rect_polygon(box)]
                else:  # even tracks: ellipses given as RLE
                    m = ellipse_mask(height, width, box)
                    r = rle_ops.encode(m)
                    seg = uncompressed_rle(r) if scene == "espresso" else r  # espresso: list-counts RLE
                img[m] = (40 * t) % 255
                seg_of[(t, k)] = seg
                mask_of[(t, k)] = m
                ann: dict[str, Any] = {
                    "id": ann_id, "image_id": k, "category_id": 1 + (t - 1) % len(CATEGORIES),
                    "bbox": [float(box[0]), float(box[1]), float(box[2] - box[0]), float(box[3] - box[1])],
                    "area": float(m.sum()), "iscrowd": 0, "segmentation": seg,
                }
                if scene in TRACKS_ONLY_IN_SCENE_JSON:
                    ann["attributes"] = {"occluded": False}
                elif si % 2:
                    ann["track_id"] = t
                else:
                    ann["attributes"] = {"track_id": t, "occluded": False}
                ann_ids_of[t].append(ann_id)
                anns.append(ann)
                ann_id += 1
            if scene == "keyboard" and k == 0:  # an annotation with an empty segmentation
                anns.append({"id": ann_id, "image_id": k, "category_id": 1, "bbox": [0.0, 0.0, 2.0, 2.0], "area": 4.0, "iscrowd": 0, "segmentation": []})
                ann_id += 1
            images.append({"id": k, "file_name": fname, "width": width, "height": height, "extra": {"name": f"{fid:06d}.png"}})
            if write_images:
                wr.jpeg(f"{folder}/images/{fname}", img)
        wr.json(f"{folder}/{COCO_NAME.get(scene, '_annotations.coco.json')}", {
            "info": {"description": f"{scene} (synthetic)"}, "images": images, "annotations": anns,
            "categories": [{"id": i + 1, "name": c, "supercategory": "object"} for i, c in enumerate(CATEGORIES)],
        })
        wr.json(f"{folder}/{TRACK_JSON.get(scene, scene + '.json')}", {
            "scene": prefix,
            "tracks": [
                {"track_id": t, "category": CATEGORIES[(t - 1) % len(CATEGORIES)], "annotation_ids": ann_ids_of[t]}
                for t in tracks
            ],
        })
        wr.text(f"{folder}/README.dataset.txt", f"{scene}: synthetic stand-in for the Roboflow export.\n")
        wr.text(f"{folder}/README.roboflow.txt", "Synthetic sample release; the real scene is under its upstream licence.\n")
        track_rows += [[scene, t, CATEGORIES[(t - 1) % len(CATEGORIES)]] for t in tracks]
        # --- queries
        scene_meta = []
        for q in range(1, qps[scene] + 1):
            qid = f"{prefix}_q{q}"
            negative = q % 4 == 3
            targets: list[int] = [] if negative else tracks[:2] if q % 4 == 2 else [tracks[(q - 1) % len(tracks)]]
            meta: dict[str, Any] = {
                "query_id": qid, "scene": prefix,
                "text_en": TEXTS_EN[(si + q) % len(TEXTS_EN)], "text_zh": TEXTS_ZH[(si + q) % len(TEXTS_ZH)],
                "target_track_ids": targets, "target_count": len(targets), "query_type": "ABC"[(q - 1) % 3],
                "requires_motion_understanding": bool(q % 2),
            }
            if q % 3 == 1:
                meta["temporal_relation"] = ["before", "while", "after"][q % 3]
            if q % 5 == 0:
                meta["expected_temporal_anchor"] = fids[-1]
            if negative:
                meta["distractor"] = True
                meta["note"] = "no object in the scene matches"
                negatives.append(qid)
            if q == 4:
                meta["difficulty"] = "hard"
            scene_meta.append(meta)
            all_meta.append(meta)
            if negative:  # q7: sentinel existence frames with no frame entries
                existence = fids[:2]
                gt_frames = [] if q == 7 else [{"frame_id": fids[k], "masks": []} for k in range(2)]
            else:
                gt_frames = []
                existence = sorted({fids[k] for t in targets for k in visible[t]})
                frame_keys = sorted({k for t in targets for k in visible[t]})
                if si == 0 and q == 1:
                    frame_keys = frame_keys[:-1]  # an existence frame without a mask entry
                for k in frame_keys:
                    masks = [{"segmentation": seg_of[(t, k)], "entity_id": f"{prefix}_e{t:03d}", "track_id": t} for t in targets if k in visible[t]]
                    gt_frames.append({"frame_id": fids[k], "masks": masks})
            entry = {
                "query_id": qid, "question": meta["text_zh"], "scene": prefix,
                "ground_truth": {"target_tracks": targets, "existence_frames": existence, "frames": gt_frames},
            }
            # the dense set (all queries) under query_masks/, the subset (q1-q3) under query_masks_36/
            for masks_dir, (plain, with_paths) in (("query_masks", dense), ("query_masks_36", subset)):
                if masks_dir == "query_masks_36" and q > 3:
                    continue
                frames_paths = []
                for fr in gt_frames:
                    k = fids.index(fr["frame_id"])
                    base = f"{folder}/{masks_dir}/frame_{fr['frame_id']:06d}/{qid}"
                    union = np.zeros((height, width), dtype=bool)
                    masks_p = []
                    for mk in fr["masks"]:
                        m = mask_of[(mk["track_id"], k)]
                        union |= m
                        rel = f"{base}/{mk['entity_id']}.png"
                        if write_query_masks:
                            wr.png(rel, m)
                        masks_p.append({**mk, "mask_image": rel})
                    if write_query_masks:
                        wr.png(f"{base}/combined_mask.png", union)
                    frames_paths.append({**fr, "masks": masks_p, "combined_mask_image": f"{base}/combined_mask.png"})
                plain.append(entry)
                with_paths.append({**entry, "ground_truth": {**entry["ground_truth"], "frames": frames_paths}})
        wr.json(f"{folder}/{prefix}_queries.json", scene_meta)
    wr.json("evaluation/R4D-Bench_queries.json", all_meta)
    wr.json("evaluation/R4D-Bench_predictions.json", {m["query_id"]: m["target_track_ids"] for m in all_meta})
    for name, (plain, with_paths) in (("all_queries", dense), ("final", subset)):
        wr.json(f"scripts/new_predictions_ground_truth_{name}.json", plain)
        wr.json(f"scripts/new_predictions_ground_truth_{name}_with_paths.json", with_paths)
    wr.csv("data/track_metadata.csv", ["scene", "track_id", "category"], track_rows)
    for rel in ("evaluation/evaluate_mask_temporal.py", "evaluation/evaluate_r4dgs.py", "scripts/predictions_ground_truth.py"):
        wr.text(rel, "# Placeholder: the official script is not part of this synthetic release.\n")
    wr.text("README.md", "# R4D-Bench (synthetic sample release)\n\nWritten by perckit.samples.r4d_bench; mirrors the release layout.\n")
    wr.text("DATASET_LAYOUT.md", "evaluation/, scripts/, data/scenes/<scene>/ (see the R4D-Bench card).\n")
    return R4DSampleRelease(
        root=Path(root), query_ids=[e["query_id"] for e in dense[0]], subset_ids=[e["query_id"] for e in subset[0]],
        negative_ids=negatives, frame_ids=frame_ids_by_scene, size=(height, width), files=sorted(wr.files),
    )
