"""The export record ``.perckit_export.json`` version 2 (:mod:`perckit.export.state`): written as version 2, read in
versions 1 and 2, and every optional key of version 2 checked as strictly as the version 1 keys (the record is
untrusted: ``convert`` replaces the folders it names and ``push`` uploads what it lists). Every config is Parquet; a
child config (ReasonAVEdit's ``videos``) names its ``parent``."""

import copy
import json
import os

import datasets
import pytest

from perckit.errors import ReleaseFormatError
from perckit.export.state import (
    MAX_TEXT_CHARS,
    STATE_FILE,
    children,
    drop_config,
    dump_state,
    owned_files,
    read_state,
    validate_state,
)


def _features(*extra: str) -> dict:
    cols = {"sample_id": datasets.Value("string"), **{c: datasets.Image() for c in extra}}
    return datasets.Features(cols).to_dict()


def record() -> dict:
    """A valid version 2 record: a default config with a preview and a Viewer verdict, and its child config."""
    return {
        "format": "perckit-export", "version": 2, "benchmark": "reason_av_edit",
        "configs": {
            "default": {
                "default": True, "dir": "data", "features": _features("preview"),
                "splits": [{"name": "test", "num_examples": 2, "num_bytes": 1000, "files": ["data/test-00000-of-00001.parquet"],
                            "max_row_bytes": 600, "max_row_group_bytes": 1000, "max_page_bytes": 1000}],
                "kind": "parquet", "preview": "preview", "viewer": {"viewable": True, "reason": ""},
                "description": "one row per sample",
            },
            "videos": {
                "default": False, "dir": "videos", "features": {"sample_id": {"dtype": "string", "_type": "Value"}, "video": {"_type": "Video"}},
                "splits": [{"name": "test", "num_examples": 2, "num_bytes": 300, "files": ["videos/test-00000-of-00001.parquet"],
                            "max_row_bytes": 150, "max_row_group_bytes": 300, "max_page_bytes": 300}],
                "kind": "parquet", "parent": "default", "description": "the clips",
            },
        },
    }


def check(state, tmp_path):
    return validate_state(state, tmp_path, "'rec.json'")


def test_a_version_2_record_round_trips_through_dump_and_read(tmp_path):
    state = record()
    (tmp_path / STATE_FILE).write_text(dump_state(state))
    back = read_state(tmp_path)
    assert back == state and json.loads((tmp_path / STATE_FILE).read_text())["version"] == 2


def test_a_version_1_record_is_read_and_written_back_as_version_2(tmp_path):
    v1 = {"format": "perckit-export", "version": 1, "benchmark": "refcoco_m",
          "configs": {"expressions": {"default": True, "dir": "data", "features": _features(),
                                      "splits": [{"name": "validation", "num_examples": 3, "num_bytes": 12.5,
                                                  "files": ["data/validation-00000-of-00001.parquet"]}]}}}
    (tmp_path / STATE_FILE).write_text(json.dumps(v1))
    state = read_state(tmp_path)
    assert state == v1
    (tmp_path / STATE_FILE).write_text(dump_state(state))
    again = read_state(tmp_path)
    assert again["version"] == 2 and again["configs"]["expressions"]["splits"][0]["num_bytes"] == 12
    legacy = {"benchmark": "refcoco_m", "configs": v1["configs"]}  # before the format / version keys
    assert check(legacy, tmp_path) == legacy


def test_owned_files_include_the_child_config(tmp_path):
    owned = owned_files(check(record(), tmp_path))
    assert {"videos/test-00000-of-00001.parquet", "data/test-00000-of-00001.parquet", "README.md", STATE_FILE} == owned


def test_drop_config_removes_the_child_configs_it_wrote():
    state = record()
    assert children(state, "default") == ["videos"]
    assert drop_config(state, "default") == ["default", "videos"] and state["configs"] == {}
    state = record()
    assert drop_config(state, "videos") == ["videos"] and list(state["configs"]) == ["default"]


def _case(case: str) -> dict:
    state = record()
    d, v = state["configs"]["default"], state["configs"]["videos"]
    vs, ds = v["splits"][0], d["splits"][0]
    edits = {
        "kind-unknown": lambda: d.update(kind="zarr"),
        "kind-files": lambda: v.update(kind="files"),
        "kind-not-a-string": lambda: v.update(kind=["parquet"]),
        "child-default": lambda: (state["configs"].pop("default"), v.update(default=True, dir="data"),
                                  vs.update(files=["data/test-00000-of-00001.parquet"])),
        "child-parent-unknown": lambda: v.update(parent="images"),
        "child-parent-itself": lambda: v.update(parent="videos"),
        "child-parent-a-child": lambda: state["configs"].update(clips=dict(copy.deepcopy(v), dir="clips", parent="videos", splits=[
            dict(vs, files=["clips/test-00000-of-00001.parquet"])])),
        "child-parent-not-a-string": lambda: v.update(parent=None),
        "child-file-not-a-shard": lambda: vs["files"].append("videos/test/a_0000.mp4"),
        "child-file-dotdot": lambda: vs["files"].insert(0, "videos/../../etc/test-00000-of-00001.parquet"),
        "child-file-other-folder": lambda: vs["files"].insert(0, "data/test-00000-of-00001.parquet"),
        "default-file-not-a-shard": lambda: ds["files"].append("data/test/a.mp4"),
        "preview-other-name": lambda: d.update(preview="picture"),
        "preview-not-a-column": lambda: d.update(preview="preview", features=_features()),
        "viewer-a-bool": lambda: d.update(viewer=False),
        "viewer-extra-key": lambda: d["viewer"].update(pages=3),
        "viewer-viewable-a-string": lambda: d["viewer"].update(viewable="no"),
        "viewer-reason-missing": lambda: d.update(viewer={"viewable": False}),
        "viewer-not-viewable-no-reason": lambda: d.update(viewer={"viewable": False, "reason": "  "}),
        "viewer-reason-too-long": lambda: d.update(viewer={"viewable": False, "reason": "x" * (MAX_TEXT_CHARS + 1)}),
        "description-too-long": lambda: d.update(description="x" * (MAX_TEXT_CHARS + 1)),
        "description-not-a-string": lambda: d.update(description={"text": "x"}),
        "config-unknown-key": lambda: d.update(delete=["/"]),
        "split-unknown-key": lambda: ds.update(upload="/etc"),
        "max-row-bytes-negative": lambda: ds.update(max_row_bytes=-1),
        "max-page-bytes-a-string": lambda: ds.update(max_page_bytes="9"),
        "max-row-group-bytes-a-bool": lambda: ds.update(max_row_group_bytes=True),
        "num-bytes-a-float-in-version-2": lambda: ds.update(num_bytes=10.5),
        "version-1-with-version-2-keys": lambda: state.update(version=1),
        "version-3": lambda: state.update(version=3),
        "version-a-bool": lambda: state.update(version=True),
    }
    edits[case]()
    return state


REFUSED = ["kind-unknown", "kind-files", "kind-not-a-string", "child-default", "child-parent-unknown", "child-parent-itself",
           "child-parent-a-child", "child-parent-not-a-string", "child-file-not-a-shard", "child-file-dotdot",
           "child-file-other-folder", "default-file-not-a-shard", "preview-other-name", "preview-not-a-column",
           "viewer-a-bool", "viewer-extra-key", "viewer-viewable-a-string", "viewer-reason-missing", "viewer-not-viewable-no-reason",
           "viewer-reason-too-long", "description-too-long", "description-not-a-string", "config-unknown-key", "split-unknown-key",
           "max-row-bytes-negative", "max-page-bytes-a-string", "max-row-group-bytes-a-bool", "num-bytes-a-float-in-version-2",
           "version-1-with-version-2-keys", "version-3", "version-a-bool"]


@pytest.mark.parametrize("case", REFUSED)
def test_a_bad_version_2_record_is_a_documented_error(case, tmp_path):
    state = _case(case)
    with pytest.raises(ReleaseFormatError) as info:
        check(state, tmp_path)
    assert "'rec.json'" in str(info.value) and "expected" in str(info.value)
    (tmp_path / STATE_FILE).write_text(json.dumps(state))
    with pytest.raises(ReleaseFormatError):
        read_state(tmp_path)


def test_a_child_config_folder_linked_out_of_the_export_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    export = tmp_path / "export"
    export.mkdir()
    os.symlink(outside, export / "videos")
    with pytest.raises(ReleaseFormatError, match="symbolic link leaves the root"):
        check(record(), export)


def test_every_accepted_variant_of_the_optional_keys(tmp_path):
    state = record()
    d = state["configs"]["default"]
    for edit in ({"preview": None}, {"viewer": {"viewable": False, "reason": "a row is larger than the Viewer reads"}}, {"kind": "parquet"}):
        s = copy.deepcopy(state)
        s["configs"]["default"].update(edit)
        assert check(s, tmp_path) == s
    s = copy.deepcopy(state)  # a child with a preview of its own, and a child without the optional keys
    s["configs"]["videos"].update(preview="preview", features=_features("preview"))
    assert check(s, tmp_path) == s
    for key in ("kind", "description"):
        s["configs"]["videos"].pop(key)
    assert check(s, tmp_path) == s
    for key in ("kind", "preview", "viewer", "description"):
        d.pop(key)
    for key in ("max_row_bytes", "max_row_group_bytes", "max_page_bytes"):
        d["splits"][0].pop(key)
    assert check(state, tmp_path) == state
