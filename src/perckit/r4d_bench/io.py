"""Adapters for the official R4D-Bench prediction files and the CLIs' ground-truth rows."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Mapping
from typing import Any

from ..errors import InputNotFoundError, PredictionError, ReleaseFormatError, ReleaseNotFoundError
from ..io.jsonio import parse_int, read_json
from ..io.paths import resolve_under
from . import features as feats
from . import release
from .files import MAX_JSON_BYTES


def _read_predictions(path: str | Path) -> Any:
    return read_json(path, error=PredictionError, not_found=InputNotFoundError, limit=MAX_JSON_BYTES)


def mask_file(repo_root: str | Path, mask_path: Any, where: str, allow_absolute_paths: bool = False) -> Path:
    """The PNG a prediction file names: a relative path must stay under ``repo_root``
    (:func:`perckit.io.paths.resolve_under`: no ``..`` component, no symbolic link out of it); an absolute path
    is refused unless ``allow_absolute_paths`` (the ``--allow-absolute-paths`` flag: for a file you wrote
    yourself; a prediction file from someone else could otherwise name any file of this machine)."""
    if allow_absolute_paths and isinstance(mask_path, str) and Path(mask_path).is_absolute() and "\x00" not in mask_path:
        return Path(mask_path)
    if isinstance(mask_path, str) and Path(mask_path).is_absolute():
        raise PredictionError(
            f"{where}: expected a mask path relative to the repo root {str(repo_root)!r}, got the absolute path "
            f"{mask_path[:200]!r} (pass allow_absolute_paths=True / --allow-absolute-paths for a file you wrote yourself)"
        )
    return resolve_under(repo_root, mask_path, where, PredictionError)


def _frame_items(value: Any, where: str) -> list[tuple[Any, Any]]:
    """``(frame key, mask path)`` pairs of one query, from either official shape."""
    if isinstance(value, Mapping) and "frames" in value:
        value = value["frames"]
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, list):
        items = []
        for i, item in enumerate(value):
            if not isinstance(item, Mapping) or "frame_id" not in item or "mask_path" not in item:
                raise PredictionError(f"{where}: item {i}: expected {{'frame_id', 'mask_path'}}, got {item!r}"[:300])
            items.append((item["frame_id"], item["mask_path"]))
        return items
    raise PredictionError(
        f"{where}: expected {{'frames': {{'<frame_id>': 'mask.png'}}}} or a list of {{'frame_id', 'mask_path'}}, "
        f"got {type(value).__name__}"
    )


def load_mask_predictions(path: str | Path, repo_root: str | Path = ".", allow_absolute_paths: bool = False) -> list[dict]:
    """Read an official mask-prediction JSON into ``mask_temporal`` prediction rows.

    Shapes: ``{query_id: {"frames": {"1": "mask.png"}}}`` or
    ``{query_id: [{"frame_id": 1, "mask_path": "..."}]}``. Relative paths
    resolve against ``repo_root`` and must stay under it; absolute paths only with
    ``allow_absolute_paths=True`` (see :func:`mask_file`); foreground is any pixel value > 0.
    """
    data = _read_predictions(path)
    if not isinstance(data, Mapping):
        raise PredictionError(f"{str(path)!r}: expected a JSON object query_id -> frames, got {type(data).__name__}")
    root = Path(repo_root)
    rows = []
    for qid, value in data.items():
        where = f"{str(path)!r}: query {qid!r}"
        frames: dict[int, dict] = {}
        for key, mask_path in _frame_items(value, where):
            fid = parse_int(key, f"{where}: frame key", PredictionError)
            if fid in frames:
                raise PredictionError(f"{where}: duplicate frame_id {fid}")
            if not isinstance(mask_path, str) or not mask_path:
                raise PredictionError(f"{where}: frame {fid}: expected a mask path string, got {mask_path!r}")
            p = mask_file(root, mask_path, f"{where}: frame {fid}: mask path", allow_absolute_paths)
            try:
                mask = release.png_mask(p, f"{where}: frame {fid}")
            except (ReleaseNotFoundError, ReleaseFormatError) as e:
                cls = InputNotFoundError if isinstance(e, ReleaseNotFoundError) else PredictionError
                raise cls(str(e)) from None
            frames[fid] = {"frame_id": fid, "mask": mask}
        rows.append({"query_id": str(qid), "frames": [frames[k] for k in sorted(frames)]})
    return rows


def load_track_predictions(path: str | Path) -> list[dict]:
    """Read ``{query_id: [ids]}`` or ``{query_id: {"target_track_ids": [...]}}`` into ``track_id`` prediction rows (ids as str)."""
    data = _read_predictions(path)
    if not isinstance(data, Mapping):
        raise PredictionError(f"{str(path)!r}: expected a JSON object query_id -> track ids, got {type(data).__name__}")
    return [
        {"query_id": str(qid), "target_track_ids": release.track_id_list(v, f"{str(path)!r}: query {qid!r}", PredictionError)}
        for qid, v in data.items()
    ]


def ground_truth_rows(ground_truth: str | Path, queries_meta: str | Path, repo_root: str | Path = ".", mask_source: str = "segmentation") -> list[dict]:
    """Builder query rows from an explicit dense-GT JSON and query-metadata JSON (what the CLIs score against)."""
    rel = release.open_query_release(repo_root, mask_source=mask_source, gt_file=ground_truth, queries_file=queries_meta)
    return [row for _, row in release.query_rows(rel, mask_source)]


def track_ground_truth_rows(queries_meta: str | Path) -> list[dict]:
    """``track_id`` reference rows from the query-metadata JSON (the official track evaluator reads ``--queries``)."""
    meta = release.load_queries_meta(queries_meta)
    rows = []
    for qid, m in meta.items():
        scene = release.normalise_scene(m["scene"]) if isinstance(m.get("scene"), str) and m["scene"] else release.scene_from_query_id(qid)
        ids = release.track_id_list(m.get("target_track_ids"), f"{str(queries_meta)!r}: query {qid!r}.target_track_ids")
        rows.append({"query_id": qid, "scene": scene, "target_track_ids": ids})
    return rows


def gt_as_predictions(rows: list[Mapping]) -> list[dict]:
    """Reference rows as predictions (the ``--self-check`` case)."""
    return [feats.to_metric_prediction(r) for r in rows]
