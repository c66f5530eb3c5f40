"""The Parquet size guard does not trust the footer: a shard whose footer under-declares its column chunks, and
a shard whose honest footer hides a dictionary bomb (one 1 MiB entry repeated by run-length indices), are
refused from their page headers before pyarrow decompresses or decodes them, with bounded memory (peak RSS of
a child process measured from /proc/self/status VmHWM), in the M4Seg and RefCOCO-M readers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.parquet_craft import under_declare

from perckit.io import parquetio
from perckit.errors import ReleaseFormatError

BIG = 96 << 20  # one value of 96 MiB (a few KB with zstd)
LIMIT = 8 << 20  # the guard's limit in the child


# ---------------------------------------------------------------- the crafted shards


def _m4seg_table(q_values: pa.Array) -> pa.Table:
    from perckit.samples.m4seg import _parquet_schema

    schema = _parquet_schema()
    n = len(q_values)
    row = {"example_id": "7", "pair_id": "7", "dataset_name": "coco_objects", "type": "spatial", "granularity": "object",
           "q": "", "a": "", "images": [{"image_id": "1", "path": "coco_2017/val2017/1.jpg", "height": 1, "width": 4}], "groundings": []}
    rows = [dict(row, example_id=str(i)) for i in range(n)]
    table = pa.Table.from_pylist(rows, schema=schema)
    return table.set_column(schema.get_field_index("q"), pa.field("q", q_values.type), q_values)


def _refcoco_table(file_names: pa.Array) -> pa.Table:
    from perckit.samples import write_release

    root = write_release("refcoco_m", _refcoco_table.tmp / "rc").root
    table = pq.read_table(sorted(root.glob("data/*.parquet"))[0])
    table = pa.concat_tables([table.slice(0, 1)] * len(file_names))
    i = table.schema.get_field_index("file_name")
    return table.set_column(i, pa.field("file_name", file_names.type), file_names)


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("shards")
    _refcoco_table.tmp = out
    # the same two shapes as RefCOCO-M shards (the column 'file_name')
    for name, values, opts in (
        ("rc_lying", pa.array([b"a" * BIG], pa.string()), {"use_dictionary": False}),
        ("rc_bomb", pa.DictionaryArray.from_arrays(pa.array([0] * 96, pa.int32()), pa.array(["b" * (1 << 20)])), {"store_schema": False}),
    ):
        path = out / name / "data" / "validation-00000-of-00001.parquet"
        path.parent.mkdir(parents=True)
        pq.write_table(_refcoco_table(values), path, compression="zstd", **opts)
        if name == "rc_lying":
            under_declare(path)
    # 1. one 96 MiB value, the footer rewritten to declare 1000 bytes
    lying = out / "lying" / "data" / "test-00000-of-00001.parquet"
    lying.parent.mkdir(parents=True)
    pq.write_table(_m4seg_table(pa.array([b"a" * BIG], pa.string())), lying, compression="zstd", use_dictionary=False)
    under_declare(lying)
    # 2. an honest footer: one 1 MiB dictionary entry repeated 96 times by run-length indices (96 MiB decoded)
    bomb = out / "bomb" / "data" / "test-00000-of-00001.parquet"
    bomb.parent.mkdir(parents=True)
    dict_q = pa.DictionaryArray.from_arrays(pa.array([0] * 96, pa.int32()), pa.array(["b" * (1 << 20)]))
    pq.write_table(_m4seg_table(dict_q), bomb, compression="zstd", store_schema=False)
    assert bomb.stat().st_size < 200_000 and lying.stat().st_size < 200_000
    return {"lying": lying, "bomb": bomb, **{n: out / n / "data" / "validation-00000-of-00001.parquet" for n in ("rc_lying", "rc_bomb")}}


def test_the_crafted_footer_lies(shards):
    md = pq.ParquetFile(shards["lying"]).metadata
    q = [md.row_group(0).column(i) for i in range(md.num_columns) if md.row_group(0).column(i).path_in_schema == "q"][0]
    assert q.total_uncompressed_size == 1000  # the footer check alone accepts it, even at the small limit
    parquetio.check_column_chunk_sizes(pq.ParquetFile(shards["lying"]), "lying.parquet", limit=LIMIT)
    # and the file still reads back (pyarrow trusts the pages): 96 MiB
    assert len(pq.read_table(shards["lying"], columns=["q"])["q"][0].as_py()) == BIG


def test_the_page_check_refuses_both_in_process(shards):
    for name in ("lying", "bomb"):
        path = shards[name]
        pf = pq.ParquetFile(path)
        parquetio.check_column_chunk_sizes(pf, name, limit=LIMIT)  # the footer alone passes
        with open(path, "rb") as f, pytest.raises(
            ReleaseFormatError,
            match=rf"^{name}: row group 0, column 'q': expected at most {LIMIT} bytes uncompressed per column chunk, "
                  r"its page headers add up to at least \d+ decompressed and decoded \(the footer declares \d+\)",
        ):
            parquetio.check_column_chunk_sizes(pf, name, limit=LIMIT, source=f)
        with open(path, "rb") as f:  # the default limit (1 GiB) accepts them
            parquetio.check_column_chunk_sizes(pf, name, source=f)


_CHILD = textwrap.dedent("""
    import json, sys
    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    from perckit.io import parquetio
    from perckit.errors import ReleaseFormatError
    from perckit.m4seg.read import parquet as m4parquet
    from perckit.refcoco_m import read as refcoco
    import pyarrow.parquet as pq
    parquetio.MAX_COLUMN_CHUNK_BYTES = int(sys.argv[3])
    reader, path = sys.argv[1], sys.argv[2]
    before = hwm()
    try:
        if reader == "m4seg":
            m4parquet.parquet_shards(open, [path], split="test")
            for _ in m4parquet.iter_parquet_tables(open, [m4parquet.ParquetShard(path)], "test", m4parquet.row_schema()):
                pass
        else:
            with open(path, "rb") as f:
                for _ in refcoco.iter_records(f, "shard.parquet"):
                    pass
        error = None
    except ReleaseFormatError as e:
        error = str(e)
    print(json.dumps({"error": error, "grew": hwm() - before}))
""")


@pytest.mark.parametrize("reader", ["m4seg", "refcoco_m"])
@pytest.mark.parametrize("shard", ["lying", "bomb"])
def test_readers_refuse_with_bounded_memory(shards, reader, shard):
    path = shards[shard if reader == "m4seg" else f"rc_{shard}"]
    out = subprocess.run([sys.executable, "-c", _CHILD, reader, str(path), str(LIMIT)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["error"] is not None, f"not refused; peak RSS grew by {result['grew'] >> 20} MiB"
    column = "q" if reader == "m4seg" else "file_name"
    assert f"row group 0, column '{column}'" in result["error"], result["error"]
    if reader == "m4seg":
        assert "test-00000-of-00001.parquet: row group 0" in result["error"]
    assert "its page headers add up to at least" in result["error"], result["error"]
    assert result["grew"] < 32 << 20, f"peak RSS grew by {result['grew'] >> 20} MiB while refusing"
