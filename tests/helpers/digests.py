"""Digests of every config of every benchmark built with ``perckit.load_dataset`` from the sample releases.

Run as a script by a test on the other datasets line (``python tests/helpers/digests.py OUT_JSON RELEASES CACHE``), and
imported by the test on this line: the two must agree row for row. Both read the same sample releases (rows keep
some absolute paths, such as Syn4D's videos) into caches of their own. The digest covers the Arrow data and schema,
not the ``huggingface`` schema metadata (whose feature names differ between the lines: ``Sequence`` / ``List``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path


def table_digest(ds) -> str:
    import pyarrow as pa

    table = ds.data.table.replace_schema_metadata(None).combine_chunks()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()


def all_digests(releases: Path, cache: Path) -> dict[str, str]:
    import perckit
    from perckit.hf.entrypoints import builder_class
    from perckit.samples import write_release

    out = {}
    for name in ("r4d_bench", "syn4d", "refcoco_m", "m4seg", "reason_av_edit"):
        release = releases / name
        if not release.exists():
            write_release(name, release)
        for config in [c.name for c in builder_class(name).BUILDER_CONFIGS]:
            dd = perckit.load_dataset(name, config, data_dir=release, cache_dir=cache)
            for split, ds in sorted(dd.items()):
                out[f"{name}/{config}/{split}"] = f"{ds.num_rows}:{table_digest(ds)}"
    return out


if __name__ == "__main__":
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    target, releases, cache = (Path(a) for a in sys.argv[1:4])
    target.write_text(json.dumps(all_digests(releases, cache), indent=1, sort_keys=True), encoding="utf-8")
