"""The builders that write Arrow tables directly (``PerckitTableBuilder``) give exactly the table that
``datasets``' per-example encoding would give for the same rows."""

import datasets
import pytest

from perckit.hf.builder import PerckitTableBuilder
from perckit.hf.entrypoints import builder_class

CASES = [
    ("r4d_bench", "all_queries", "r4d_release"),
    ("r4d_bench", "subset_36", "r4d_release"),
    ("r4d_bench", "frames", "r4d_release"),
    ("reason_av_edit", "default", "reason_av_edit_release"),
]


@pytest.mark.parametrize("name, config, release", CASES)
def test_tables_equal_per_example_encoding(name, config, release, request, tmp_path):
    root = request.getfixturevalue(release).root
    builder = builder_class(name)(config_name=config, data_dir=str(root), cache_dir=str(tmp_path / "cache"))
    assert isinstance(builder, PerckitTableBuilder)
    builder.download_and_prepare()
    built = builder.as_dataset("test")
    (split,) = builder._split_generators(datasets.DownloadManager(dataset_name=name))
    rows = list(builder._generate_rows(**split.gen_kwargs))
    keys = [k for k, _ in rows]
    assert len(set(keys)) == len(keys) == built.num_rows > 0
    features = builder.info.features
    expected = datasets.Dataset.from_list([features.encode_example(r) for _, r in rows], features=features)
    assert built.features == expected.features
    assert built.data.table.equals(expected.data.table)


def test_rows_with_other_keys_are_refused(r4d_release, tmp_path):
    builder = builder_class("r4d_bench")(config_name="all_queries", data_dir=str(r4d_release.root), cache_dir=str(tmp_path))
    builder._generate_rows = lambda **kw: iter([("k", {"query_id": "q"})])
    with pytest.raises(ValueError, match=r"row 'k': expected the keys of the features .*\(missing \['distractor'"):
        next(builder._generate_tables())


def test_rows_to_table_zero_copy_equals_from_pylist():
    import pyarrow as pa

    from perckit.hf.builder import MEDIA_STORAGE, rows_to_table

    schema = pa.schema([("id", pa.string()), ("video", MEDIA_STORAGE), ("image", MEDIA_STORAGE), ("n", pa.int32())])
    for row in [
        {"id": "a", "video": {"bytes": b"\x00" * 1000, "path": "v/a.mp4"}, "image": None, "n": 3},
        {"id": None, "video": {"bytes": None, "path": "v/b.mp4"}, "image": {"bytes": b"", "path": None}, "n": None},
    ]:
        table = rows_to_table([row], schema)
        assert table.schema == schema
        assert table.equals(pa.Table.from_pylist([row], schema=schema))
        assert table.to_pylist() == [row]


def test_table_builds_pause_and_restore_the_collector(r4d_release, tmp_path, monkeypatch):
    """A table builder's whole build (split generation and the writing of the split) runs with the cyclic
    collector paused, and the collector's state is restored after, also when the build fails."""
    import gc

    import pytest

    seen = []
    builder = builder_class("r4d_bench")(config_name="all_queries", data_dir=str(r4d_release.root), cache_dir=str(tmp_path / "a"))
    split_generators, generate_tables = builder._split_generators, builder._generate_tables

    def spy_split(*a, **kw):
        seen.append(("split", gc.isenabled()))
        return split_generators(*a, **kw)

    def spy_tables(**kw):
        seen.append(("tables", gc.isenabled()))
        yield from generate_tables(**kw)

    monkeypatch.setattr(builder, "_split_generators", spy_split)
    monkeypatch.setattr(builder, "_generate_tables", spy_tables)
    assert gc.isenabled()
    builder.download_and_prepare()
    assert seen == [("split", False), ("tables", False)] and gc.isenabled()

    def failing(**kw):
        raise RuntimeError("boom")
        yield

    broken = builder_class("r4d_bench")(config_name="all_queries", data_dir=str(r4d_release.root), cache_dir=str(tmp_path / "b"))
    monkeypatch.setattr(broken, "_generate_tables", failing)
    with pytest.raises(Exception) as failed:  # datasets wraps it in a DatasetGenerationError
        broken.download_and_prepare()
    assert "boom" in repr(failed.value) + repr(failed.value.__cause__) + repr(failed.value.__context__)
    assert gc.isenabled()
    gc.disable()  # a caller that turned it off keeps it off
    try:
        builder_class("r4d_bench")(config_name="all_queries", data_dir=str(r4d_release.root), cache_dir=str(tmp_path / "c")).download_and_prepare()
        assert not gc.isenabled()
    finally:
        gc.enable()
