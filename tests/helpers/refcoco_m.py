"""RefCOCO-M test data: the split name, RLE / reference / prediction rows by hand, and edits of a copied sample release."""

from __future__ import annotations

import shutil

import pyarrow.parquet as pq

from perckit.io.paths import MAX_RELEASE_FILE_BYTES, open_regular_file
from perckit.refcoco_m import read as release
from perckit.samples import refcoco_m as sample

SPLIT = "validation"


def R(counts, size=(2, 3)):
    return {"size": list(size), "counts": counts}


def REF(eid, counts, size=(2, 3), category="dog", supercategory="animal"):
    return {"expression_id": eid, "mask": R(counts, size), "category": category, "supercategory": supercategory}


def PRED(eid, counts, size=(2, 3)):
    return {"expression_id": eid, "mask": R(counts, size)}


def copy_release(rcm_release, tmp_path):
    """A copy of the sample release under ``tmp_path/release`` (tests edit the copy)."""
    root = tmp_path / "release"
    shutil.copytree(rcm_release.root, root)
    return root


def edit_first_shard(root, fn):
    """Apply ``fn`` to the rows of the first Parquet shard and write it back."""
    path = root / sample.shard_name(0, 2)
    rows = read_shard(path)
    fn(rows)
    sample.write_shard(path, rows)


def iter_release_rows(root, options=None):
    """Every validated image row of a local release (all shards, shard order then row order)."""
    options = options or release.ReadOptions()
    state = release.SplitState()
    for path in release.find_shards(root):
        with open_regular_file(path, release.shard_label(path, root), MAX_RELEASE_FILE_BYTES) as f:
            yield from release.read_rows(f, release.shard_label(path, root), options, state)


def read_all(root, **options):
    return list(iter_release_rows(root, release.ReadOptions(**options)))


def read_shard(path):
    """The rows of one shard as dicts (for tests that edit a release), read through the checked opener."""
    with open_regular_file(path, "sample release shard", MAX_RELEASE_FILE_BYTES) as f:
        return pq.read_table(f).to_pylist()


def all_expression_rows(root, with_images=False, options=None):
    """Every ``expressions`` row of a local release, without ``datasets``: the validated image rows
    (:func:`iter_release_rows`) through :func:`perckit.refcoco_m.read.expression_rows`."""
    opts = options or release.ReadOptions(read_images=with_images)
    return [r for row in iter_release_rows(root, opts) for _, r in release.expression_rows(row, with_images)]
