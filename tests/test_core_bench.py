"""Smoke tests of scripts/bench.py and scripts/bench_floors.py: the floors run on the sample releases and count
what they read, the M4Seg child protocol answers, the table prints every row. No timing is asserted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from perckit.samples import write_release

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import bench  # noqa: E402
import bench_floors  # noqa: E402


def test_m4seg_floors_read_every_row_and_mask(tmp_path):
    rel = write_release("m4seg", tmp_path / "rel", train_rows=60, test_rows=5, write_manifest=False)
    parquet = bench_floors.m4seg_parquet_floor(rel.root, "train", out_dir=tmp_path)
    native = bench_floors.m4seg_native_floor(rel.root, "train", out_dir=tmp_path)
    with_ijson = bench_floors.m4seg_native_floor(rel.root, "train", out_dir=tmp_path, parser="ijson")
    assert parquet["rows"] == native["rows"] == with_ijson["rows"] == 60
    assert parquet["masks"] == native["masks"] == with_ijson["masks"] == rel.num_groundings["train"]
    assert not list(tmp_path.glob("*.arrow"))  # the floors' Arrow files are removed


def test_tiled_m4seg_release_has_unique_ids_and_the_real_layout(tmp_path):
    rel = write_release("m4seg", tmp_path / "rel", train_rows=300, test_rows=5, shards=2, write_manifest=False, tile_block=64)
    assert len(rel.train_ids) == len(set(rel.train_ids)) == 300
    assert len(list((rel.root / "data").glob("train-*-of-00002.parquet"))) == 2
    parquet = bench_floors.m4seg_parquet_floor(rel.root, "train", out_dir=tmp_path)
    native = bench_floors.m4seg_native_floor(rel.root, "train", out_dir=tmp_path)
    assert parquet["rows"] == native["rows"] == 300
    assert parquet["masks"] == native["masks"] == rel.num_groundings["train"]


def test_tiled_m4seg_release_builds_from_both_sources(tmp_path):
    from perckit.hf.entrypoints import builder_class

    rel = write_release("m4seg", tmp_path / "rel", train_rows=200, test_rows=5, shards=2, write_manifest=False, tile_block=50)
    ids = {}
    for source in ("parquet", "native"):
        b = builder_class("m4seg")(config_name="default", data_dir=str(rel.root), cache_dir=str(tmp_path / source),
                                   source=source, splits=("train",))
        b.download_and_prepare()
        ids[source] = b.as_dataset("train")["example_id"]
    assert ids["parquet"] == ids["native"] == rel.train_ids


def test_refcoco_and_syn4d_floors_count_their_rows(tmp_path):
    ref = write_release("refcoco_m", tmp_path / "ref", num_images=6)
    assert bench_floors.refcoco_m_floor(ref.root, out_dir=tmp_path)["rows"] == len(ref.expression_ids)
    syn = write_release("syn4d", tmp_path / "syn", num_queries=8, depth_hw=(6, 8), write_video=False)
    for config in ("tracking", "challenge"):
        assert bench_floors.syn4d_floor(syn.root, config, out_dir=tmp_path)["rows"] == 16


def test_m4seg_floor_child_reports_json(tmp_path):
    rel = write_release("m4seg", tmp_path / "rel", train_rows=20, test_rows=5, write_manifest=False)
    info = bench_floors.run_child("_floor", rel.root, "parquet", 1, tmp_path / "cache")
    assert info["rows"] == 20 and info["peak_rss_mb"] > 0 and info["wall_s"] > 0


def test_m4seg_rows_give_every_target():
    def run(size, source, kind, p, cpu, rss):
        return {"size": size, "source": source, "kind": kind, "num_proc": p, "prepare_s": cpu * (1 if p == 1 else 0.55) + 0.5,
                "work_cpu_s": cpu, "peak_rss_mb": rss, "rows": size, "masks": size * 3, "runs": 1, "wall_s": cpu + 2}

    def results(large, small, build_cpu):
        out = []
        for s in ("parquet", "native"):
            out += [run(large, s, "floor", 1, 4.0, 400), run(large, s, "build", 1, build_cpu, 420), run(small, s, "build", 1, 0.5, 380)]
            out += [run(large, s, "build", 2, build_cpu, 500)] if s == "parquet" else []
        return out

    def targets(rows):
        return {(r["case"], r["measure"]): (r["target"], r["ok"]) for r in rows}

    big = targets(bench_floors.m4seg_rows(results(743_463, 50_000, 5.6)))
    assert big[("m4seg parquet", "build / floor (CPU), 743k rows")] == ("<= 1.5", True)
    assert big[("m4seg native", "build / floor (CPU), 743k rows")] == ("<= 1.5", True)
    assert big[("m4seg parquet", "peak RSS 743k / 50k rows")] == ("<= 1.25", True)
    assert big[("m4seg parquet", "speedup num_proc=2 / 1 (wall), 743k rows")] == (">= 1.6", True)
    assert ("m4seg native", "speedup num_proc=2 / 1 (wall), 743k rows") not in big  # the native source: num_proc=1 only
    missed = targets(bench_floors.m4seg_rows(results(743_463, 50_000, 6.4)))
    assert missed[("m4seg native", "build / floor (CPU), 743k rows")] == ("<= 1.5", False)
    small = targets(bench_floors.m4seg_rows(results(10_000, 2_000, 9.0)))  # below GATED_ROWS: reported, the RSS ratio checked
    assert small[("m4seg parquet", "build / floor (CPU), 10k rows")] == (None, None)
    assert small[("m4seg native", "peak RSS 10k / 2k rows")] == ("<= 1.25", True)
    assert ("m4seg parquet", "rows/s, 10k rows, num_proc=1") in small


def test_m4seg_plans_measure_the_issue_sizes():
    """The default run: Parquet at the real 743,463 rows, the native source at 50,000, both from GATED_ROWS."""
    plan = bench_floors.M4SEG_PLANS["default"]
    assert plan["parquet"][0][0] == bench_floors.M4SEG_REAL_ROWS and plan["parquet"][2] == (1, 2)
    assert min(plan["parquet"][0][0], plan["native"][0][0]) >= bench_floors.GATED_ROWS
    assert bench_floors.M4SEG_PLANS["full"]["native"][0][0] == bench_floors.M4SEG_REAL_ROWS


@pytest.mark.parametrize("tile_block", [64, None])
def test_m4seg_floors_write_the_builds_rows(tmp_path, tile_block):
    """Each M4Seg floor writes exactly the rows the build writes (the same table), on a tiled release and on a
    generated one whose train split repeats pair ids (``pair_id#k``)."""
    import pyarrow as pa

    from perckit.hf.entrypoints import builder_class

    rel = write_release("m4seg", tmp_path / "rel", train_rows=300, test_rows=5, shards=2, write_manifest=False, tile_block=tile_block)
    for source, floor in (("parquet", bench_floors.m4seg_parquet_floor), ("native", bench_floors.m4seg_native_floor)):
        out = floor(rel.root, "train", out_dir=tmp_path, keep=True)
        b = builder_class("m4seg")(config_name="default", data_dir=str(rel.root), cache_dir=str(tmp_path / source), source=source,
                                   splits=("train",))
        b.download_and_prepare()
        built = b.as_dataset("train").data.table
        assert pa.ipc.open_stream(out["path"]).read_all().equals(built.replace_schema_metadata(None)), source
        if source == "native":  # the ijson variant (reported, not gated) writes the same table
            out = floor(rel.root, "train", out_dir=tmp_path, keep=True, parser="ijson")
            assert pa.ipc.open_stream(out["path"]).read_all().equals(built.replace_schema_metadata(None))


def test_bench_cases_prints_one_table_and_reports_a_failing_case(capsys, monkeypatch):
    def ok_case(quick=False):
        return [bench_floors.row("demo", "a / b", 1.5, "<= 2", True, "info line")]

    def broken_case(quick=False):
        raise RuntimeError("boom")

    monkeypatch.setitem(bench.CASES, "demo_ok", ok_case)
    monkeypatch.setitem(bench.CASES, "demo_broken", broken_case)
    assert bench.main(["cases", "demo_ok", "demo_broken", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "case" in out and "measure" in out and "target" in out and "met" in out
    assert "demo" in out and "1.50" in out and "FAILED: RuntimeError: boom" in out
    assert "1 targets met, 1 missed" in out


def test_bench_cases_refuses_an_unknown_case(capsys):
    assert bench.main(["cases", "no_such_case"]) == 2
    assert "unknown case" in capsys.readouterr().err


@pytest.mark.slow
def test_bench_quick_syn4d_build_case_runs(capsys):
    assert bench.main(["cases", "syn4d_build", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "build / floor (tracking)" in out and "build / floor (challenge)" in out


def test_refer_iou_pairs_tile_under_new_ids_and_the_launcher_measures_a_child(tmp_path):
    """The command-line case's inputs (tiled pairs, every id once) and its measure: a fresh process's wall time, its
    own peak RSS (a 200 MB buffer shows, this larger process does not) and its stdout; a failing command raises."""
    import bench_cases

    preds, refs = bench_cases.refer_iou_pairs(12, h=48, w=64, unique=5)
    assert [p["expression_id"] for p in preds] == [r["expression_id"] for r in refs] == [f"{i}:0" for i in range(12)]
    assert preds[7]["mask"] == preds[2]["mask"] and refs[7]["category"] == "car"  # tiled masks, categories by index
    ballast = b"x" * (400 << 20)  # this process: larger than the child
    big, small = bench_cases.run_measured([[sys.executable, "-c", "b = bytearray(200 << 20); print('hi')"],
                                           [sys.executable, "-c", "print('there')"]], tmp_path, 2)
    wall, peak, outs, cpu = big
    assert outs == ["hi\n", "hi\n"] and small[2] == ["there\n"] * 2 and 0 < cpu <= wall < 60 and 200 <= peak < 380, big
    assert small[1] < 100, small
    del ballast
    with pytest.raises(RuntimeError, match="exited 3"):
        bench_cases.run_measured([[sys.executable, "-c", "import sys; sys.exit(3)"]], tmp_path, 1)


@pytest.mark.slow
def test_the_four_ways_of_scoring_refer_iou_report_six_ratios(monkeypatch):
    """The core function, the accumulator, the evaluate module and the command line, each in its own interpreter on
    the same two files, give the same miou (the case raises otherwise) and six ratios: no timing is asserted."""
    import bench_cases

    monkeypatch.setattr(bench_cases, "SCORING_QUICK_PAIRS", 30)
    rows = bench_cases.case_refer_iou_200k(quick=True)
    assert [r["measure"] for r in rows] == [f"{what}, {way} / core, 30 pairs" for way in ("evaluate module", "accumulator", "command line")
                                            for what in ("time", "peak RSS")]
    assert all(r["value"] > 0 and r["ok"] is None for r in rows)
    assert "miou" in rows[0]["info"] and "whole process" in rows[0]["info"]



def test_the_pictures_floor_draws_one_picture_per_expression_picture(tmp_path):
    """convert_previews' reported floor decodes each image once and writes one JPEG per picture the previewer draws:
    a sample with a sentence (the expressions of one sample share theirs)."""
    import bench_cases
    from perckit.hf.entrypoints import builder_class

    write_release("refcoco_m", tmp_path / "rel", num_images=5)
    seconds, images, pictures = bench_cases._picture_floor(tmp_path / "rel")
    bl = builder_class("refcoco_m")(config_name="expressions", data_dir=str(tmp_path / "rel"), cache_dir=str(tmp_path / "c"))
    bl.download_and_prepare()
    rows = bl.as_dataset("validation").select_columns(["sample_id"]).to_list()
    assert seconds > 0 and images == 5 and pictures == len({r["sample_id"] for r in rows}) > 0
