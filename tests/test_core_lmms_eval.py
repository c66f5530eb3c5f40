"""perckit.lmms_eval: the lmms-eval tasks of RefCOCO-M (mask IoU) and M4Seg, without lmms-eval installed.

The task functions run on the rows of the sample releases' Parquet exports (perckit.export.convert, read back
with plain datasets as lmms-eval reads them): model answers made from the ground truth give the perfect score,
perturbed answers in every parsed form give exactly the metric module's numbers on the same predictions, in any
item order; the YAML files parse (with a loader that accepts ``!function``) and name functions that exist.
"""

import importlib.util
import json
import pickle
import random
import time

import datasets
import numpy as np
import pytest
import yaml
from helpers.bad_inputs import far_apart_polygon
from helpers.lmms import load_task, task_docs
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import masks as oracle

from perckit import lmms_eval as le
from perckit import rle
from perckit.errors import InputNotFoundError, OptionError, PredictionError
from perckit.export import convert
from perckit.lmms_eval import __main__ as le_main
from perckit.lmms_eval.m4seg import utils as m4u
from perckit.lmms_eval.refcoco_m import utils as rcu
from perckit.m4seg import to_metric_reference as m4_reference
from perckit.m4seg.read.predictions import parse_grounded_answer
from perckit.m4seg.metric import compute as m4seg_compute
from perckit.refcoco_m import to_metric_reference as rc_reference
from perckit.refcoco_m.metric import refer_iou

#: M4Seg's text metrics with the stub encoder (bag of words), METEOR left out (its jar needs seconds of Java)
M4_TEST_OPTIONS = dict(m4u.OPTIONS, embed_fn="stub", metrics=["miou", "recall", "ss", "siou", "i_ss", "i_siou"])


class _Loader(yaml.SafeLoader):
    """A YAML loader that reads ``!function utils.x`` as a ("function", "utils.x") marker."""


_Loader.add_constructor("!function", lambda loader, node: ("function", loader.construct_scalar(node)))


@pytest.fixture(scope="module")
def exports(refcoco_release, m4_release, tmp_path_factory):
    out = tmp_path_factory.mktemp("lmms_exports")
    cache = tmp_path_factory.mktemp("lmms_cache")
    quiet = {"cache_dir": cache, "progress": False, "log": lambda m: None}
    convert("refcoco_m", refcoco_release.root, "expressions", out / "refcoco_m", **quiet)
    convert("m4seg", m4_release.root, "default", out / "m4seg", image_root=str(m4_release.image_root), splits=("test",), **quiet)
    convert("m4seg", m4_release.root, "default", out / "m4seg_no_images", splits=("test",), **quiet)
    return out


def _docs(exports, name, split):
    """The export's rows as lmms-eval reads them: the parquet builder over the split's files."""
    files = sorted(str(p) for p in (exports / name / "data").glob(f"{split}-*.parquet"))
    return datasets.load_dataset("parquet", data_files={split: files}, split=split, cache_dir=str(exports / "ds_cache"))


@pytest.fixture(scope="module")
def rc_docs(exports):
    return _docs(exports, "refcoco_m", "validation")


@pytest.fixture(scope="module")
def m4_docs(exports):
    return _docs(exports, "m4seg", "test")


@pytest.fixture
def m4_options(monkeypatch):
    monkeypatch.setattr(m4u, "OPTIONS", M4_TEST_OPTIONS)
    return M4_TEST_OPTIONS


def _aggregate(utils, items):
    return {key: fn(items) for key, fn in utils.AGGREGATIONS.items()}


# ---------------------------------------------------------------- the YAML files


@pytest.mark.parametrize("benchmark", sorted(le.TASKS))
def test_yaml_parses_and_names_existing_functions(benchmark):
    """Each task YAML loads with ``!function`` markers, every marker names a callable of the utils.py beside it
    (also when that file is imported by its path, as lmms-eval does), and metric_list is exactly the utils'
    AGGREGATIONS, one per key process_results returns."""
    path = le.task_yaml(benchmark)
    config = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    utils = {"refcoco_m": rcu, "m4seg": m4u}[benchmark]
    spec = importlib.util.spec_from_file_location("utils", path.parent / "utils.py")
    by_path = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(by_path)
    markers = [v for v in config.values() if isinstance(v, tuple)]
    markers += [m["aggregation"] for m in config["metric_list"]]
    assert len(markers) == 4 + len(utils.KEYS)
    for kind, ref in markers:
        module, attr = ref.split(".")
        assert (kind, module) == ("function", "utils")
        assert callable(getattr(utils, attr)) and callable(getattr(by_path, attr))
    assert [m["metric"] for m in config["metric_list"]] == list(utils.KEYS)
    for m in config["metric_list"]:
        assert utils.AGGREGATIONS[m["metric"]].__name__ == m["aggregation"][1].split(".")[1]
        assert m["higher_is_better"] is (m["metric"] != "unparsed")
    assert config["output_type"] == "generate_until"
    assert config["task"] == path.stem
    assert config["dataset_path"] == "parquet"
    assert list(config["dataset_kwargs"]["data_files"]) == [config["test_split"]] == [le.TASKS[benchmark][3]]


# ---------------------------------------------------------------- RefCOCO-M


def test_refcoco_m_visual_text_target(rc_docs):
    doc = rc_docs[0]
    (image,) = rcu.refcoco_m_doc_to_visual(doc)
    assert image.mode == "RGB" and image.size == (doc["width"], doc["height"])
    text = rcu.refcoco_m_doc_to_text(doc, {"pre_prompt": "PRE ", "post_prompt": " POST"})
    assert text.startswith("PRE ") and text.endswith(" POST") and doc["sentence"] in text
    assert f'"size": [{doc["height"]}, {doc["width"]}]' in text
    assert json.loads(rcu.refcoco_m_doc_to_target(doc)) == {"size": doc["mask"]["size"], "counts": doc["mask"]["counts"]}


def test_refcoco_m_ground_truth_scores_perfectly(rc_docs):
    items = [rcu.refcoco_m_process_results(d, [rcu.refcoco_m_doc_to_target(d)])["miou"] for d in rc_docs]
    out = _aggregate(rcu, items)
    assert out == {"miou": 1.0, "ciou": 1.0, "precision@0.5": 1.0, "precision@0.7": 1.0, "precision@0.9": 1.0, "unparsed": 0.0}


def _box_dense(box, h, w):
    x1, y1, x2, y2 = box
    m = np.zeros((h, w), dtype=bool)
    m[y1:y2, x1:x2] = True
    return m


def _refcoco_answers(docs):
    """(answer text, expected refer_iou prediction, parsed) per doc, cycling through every form the task reads."""
    out = []
    for i, d in enumerate(docs):
        h, w = d["height"], d["width"]
        gt = rle.decode(d["mask"]).astype(bool)
        eid = d["expression_id"]
        form = i % 7
        if form == 0:  # a shifted mask as RLE JSON in prose
            mask = rle.encode(np.roll(gt, 2, axis=1))
            text, parsed = f"Here is the mask: {json.dumps(mask)}. Done.", True
        elif form == 1:  # an uncompressed RLE in a code fence
            mask = rle.encode(np.roll(gt, 1, axis=0))
            flat = np.roll(gt, 1, axis=0).ravel(order="F").astype(np.uint8)
            counts, cur, n = [], 0, 0
            for v in flat:
                if v != cur:
                    counts.append(n)
                    cur, n = v, 0
                n += 1
            counts.append(n)
            text, parsed = "```json\n" + json.dumps({"size": [h, w], "counts": counts}) + "\n```", True
        elif form == 2:  # polygons in pixels
            poly = [1, 1, w - 2, 1, w - 2, h // 2, 1, h // 2]
            mask = rle.from_polygons([poly], h, w)
            text, parsed = json.dumps({"polygons": [poly]}), True
        elif form == 3:  # a Qwen-style box list
            box = [2, 3, w // 2, h // 2]
            mask = rle.encode(_box_dense(box, h, w))
            text, parsed = json.dumps([{"bbox_2d": box, "label": d["sentence"]}]), True
        elif form == 4:  # a mask at twice the size: resized by the metric (resize_predictions="nearest")
            mask = rle.encode(np.repeat(np.repeat(gt, 2, axis=0), 2, axis=1))
            text, parsed = json.dumps({"mask": mask}), True
        elif form == 5:  # nothing readable
            mask, text, parsed = rle.empty(h, w), "I cannot see that object {not json", False
        else:  # the ground truth itself
            mask, text, parsed = dict(d["mask"]), rcu.refcoco_m_doc_to_target(d), True
        out.append((text, {"expression_id": eid, "mask": mask}, parsed))
    return out


def test_refcoco_m_perturbed_answers_equal_the_metric(rc_docs):
    """Every answer form, parsed and scored through the accumulator items, gives refer_iou's numbers on the same
    predictions exactly, whatever the order the items arrive in (lmms-eval gathers the ranks' items)."""
    answers = _refcoco_answers(rc_docs)
    items = [rcu.refcoco_m_process_results(d, [text])["ciou"] for d, (text, _, _) in zip(rc_docs, answers)]
    expected = refer_iou([p for _, p, _ in answers], [rc_reference(d) for d in rc_docs], **rcu.OPTIONS)
    assert expected["miou"] < 1.0
    unparsed = sum(1 for _, _, ok in answers if not ok) / len(answers)
    want = {k: expected[k] for k in ("miou", "ciou", "precision@0.5", "precision@0.7", "precision@0.9")}
    want["unparsed"] = unparsed
    assert _aggregate(rcu, items) == want
    shuffled = list(items)
    random.Random(3).shuffle(shuffled)
    assert _aggregate(rcu, shuffled) == want
    assert [x["form"] for x in items[:7]] == ["rle", "rle", "polygons", "box", "rle", "none", "rle"]


def test_refcoco_m_items_are_json_and_picklable(rc_docs):
    """An item is plain JSON (lmms-eval writes it into the sample log) and pickles (all_gather_object); every
    reported key carries the same item; a doc scored twice is refused at the aggregation."""
    out = rcu.refcoco_m_process_results(rc_docs[0], ["nothing"])
    assert set(out) == set(rcu.KEYS) and len({id(v) for v in out.values()}) == 1
    one = out["miou"]
    assert json.loads(json.dumps(one)) == one == pickle.loads(pickle.dumps(one))
    with pytest.raises(PredictionError, match="scored in both"):
        rcu.refcoco_m_miou([one, json.loads(json.dumps(one))])
    with pytest.raises(OptionError, match="process_results item"):
        rcu.refcoco_m_miou([{"miou": 1.0}])


def test_mask_forms_and_bounds():
    h, w = 4, 6
    full = rle.encode(np.ones((h, w), dtype=bool))
    assert le.mask_from_text(f"```\n{json.dumps(full)}\n```", h, w) == (full, "rle")
    assert le.mask_from_text('{"segmentation": [[0, 0], [6, 0], [6, 4], [0, 4]]}', h, w)[1] == "polygons"
    assert le.mask_from_text("box: [0, 0, 3, 2]", h, w) == (rle.encode(_box_dense([0, 0, 3, 2], h, w)), "box")
    assert le.mask_from_text('{"bbox": [3, 0, 1, 2]}', h, w) is None  # x2 < x1: not a box
    assert le.mask_from_text('{"size": [4, 6], "counts": "??"}', h, w) is None  # a bad RLE reads as nothing
    assert le.mask_from_text("[" * 100000 + json.dumps(full), h, w) is None  # too deep: skipped, no RecursionError
    hidden = "{ " * le.MAX_JSON_STARTS + json.dumps(full)
    assert le.mask_from_text(hidden, h, w) is None  # the scan stops after MAX_JSON_STARTS openings
    assert le.mask_from_text("{ " * (le.MAX_JSON_STARTS - 1) + json.dumps(full), h, w) == (full, "rle")
    assert le.first_text([["a", "b"]]) == "a" and le.first_text([]) == "" and le.first_text([None]) == ""


_edge = st.sampled_from([-3.0, -0.5, 0.0, 0.25, 0.4999999999999999, 0.5, 0.5000000000000001, 1.0, 1.5, 2.5, 7.5, 11.0, 12.0, 1e300, -1e300])
_coord = st.one_of(_edge, st.floats(-3, 14, allow_nan=False), st.integers(-3, 14))


@settings(max_examples=300, deadline=None)
@given(st.tuples(_coord, _coord, _coord, _coord), st.integers(1, 12), st.integers(1, 12))
def test_box_mask_is_the_dense_box_bit_for_bit(box, h, w):
    """The box is built in the RLE domain (no H x W array): the same RLE as the dense outer product of its rows and
    columns whose pixel centres fall inside, on pixel edges, halves and far values alike."""
    assert le.box_mask(box, h, w) == oracle.box_mask(box, h, w)


def test_box_mask_of_a_huge_image_costs_its_columns_not_its_pixels():
    full = le.box_mask([0, 0, 1 << 30, 1], 1, 1 << 30)  # 2^30 pixels: a dense box would take 1 GiB, then 3 copies
    assert full == rle.from_uncompressed({"size": [1, 1 << 30], "counts": [0, 1 << 30]})
    side = 1 << 15
    box = le.box_mask([100.5, 7, 200, 30000], side, side)  # centres 100.5 .. 199.5 and 7.5 .. 29999.5
    assert rle.area(box) == 100 * 29993 and rle.to_bbox(box) == [100.0, 7.0, 100.0, 29993.0]


def test_the_far_apart_polygon_answer_reads_as_nothing():
    """Issue 28's 460 KB polygon answer: the guard refuses it (RLEError, caught by the parser), so the answer is
    unparsed and scores as the empty mask; a later JSON value in the same answer is still read."""
    answer = json.dumps({"polygons": [far_apart_polygon(480, 640)]})
    assert le.mask_from_text(answer, 480, 640) is None
    box = le.mask_from_text(answer + ' or the box {"bbox": [0, 0, 4, 4]}', 480, 640)
    assert box is not None and box[1] == "box" and rle.area(box[0]) == 16


def test_refcoco_m_task_scores_the_46_character_answer_from_its_runs(rc_docs):
    """Issue 28's answer declaring a 32768 x 32768 mask (all foreground): resized to the image from its runs in
    milliseconds (it was decoded whole: 34 s, 2.2 GB), so its IoU is |G| / (H x W)."""
    doc = rc_docs[0]
    answer = '{"size": [32768, 32768], "counts": "0PPPPPP1"}'
    start = time.perf_counter()
    one = rcu.refcoco_m_process_results(doc, [answer])["miou"]
    assert time.perf_counter() - start < 1
    assert one["parsed"] and one["form"] == "rle"
    h, w = int(doc["height"]), int(doc["width"])
    assert rcu.refcoco_m_miou([one]) == rle.area(doc["mask"]) / (h * w)


# ---------------------------------------------------------------- M4Seg


def test_m4seg_visual_text_target(exports, m4_docs, m4_release, monkeypatch):
    doc = m4_docs[0]
    images = m4u.m4seg_doc_to_visual(doc)
    assert [im.size for im in images] == [(im["width"], im["height"]) for im in doc["images"]]
    text = m4u.m4seg_doc_to_text(doc)
    assert doc["q"] in text and all(f"(IMAGE{k})" in text for k in range(1, len(doc["images"]) + 1))
    target = json.loads(m4u.m4seg_doc_to_target(doc))
    assert len(target["masks"]) == len(doc["groundings"])
    bare = _docs(exports, "m4seg_no_images", "test")[0]
    monkeypatch.delenv(m4u.IMAGE_ROOT_ENV, raising=False)
    with pytest.raises(InputNotFoundError, match=m4u.IMAGE_ROOT_ENV):
        m4u.m4seg_doc_to_visual(bare)
    monkeypatch.setenv(m4u.IMAGE_ROOT_ENV, str(m4_release.image_root))
    assert [im.size for im in m4u.m4seg_doc_to_visual(bare)] == [im.size for im in images]


def test_m4seg_ground_truth_scores_perfectly(m4_docs, m4_options):
    items = [m4u.m4seg_process_results(d, [m4u.m4seg_doc_to_target(d)])["miou"] for d in m4_docs]
    out = _aggregate(m4u, items)
    assert out.pop("meteor") is None and out.pop("unparsed") == 0.0
    assert out == pytest.approx({k: 1.0 for k in out}, abs=1e-12)
    assert all(x["form"] == "json" for x in items)


def _m4_answers(docs):
    """(answer text, expected m4seg prediction, parsed) per doc, cycling through every form the task reads."""
    out = []
    for i, d in enumerate(docs):
        eid = d["example_id"]
        target = json.loads(m4u.m4seg_doc_to_target(d))
        n = len(d["images"])
        form = i % 6
        if form == 0:  # the JSON form, the last grounding dropped
            answer = target["answer"]
            cut = answer.rfind("[SEG]")
            answer = answer[:cut] + answer[cut + 5:] if cut >= 0 else answer
            masks = target["masks"][:-1]
            text, pred, ok = json.dumps({"answer": answer, "masks": masks}), parse_grounded_answer(answer, masks, eid), True
        elif form == 1:  # m4seg's prediction schema (the rows' names), every grounding moved to image 1 (masks resized)
            gs = [{"image_index": 1, "name": g["name"], "segmentation": dict(g["segmentation"])} for g in d["groundings"]]
            pred = {"example_id": eid, "a": target["answer"], "groundings": gs}
            text, ok = "```json\n" + json.dumps({"a": target["answer"], "groundings": gs}) + "\n```", True
        elif form == 2:  # inline RLE JSON after each [SEG] (IMAGEk)
            answer, masks = target["answer"], list(target["masks"])
            pieces = answer.split("[SEG]")
            text = pieces[0]
            for k, piece in enumerate(pieces[1:]):
                tag_end = piece.find(")") + 1
                text += "[SEG]" + piece[:tag_end] + " " + json.dumps(masks[k]) + piece[tag_end:]
            stripped, ok = text, True
            for m in masks:
                stripped = stripped.replace(json.dumps(m), " ")
            pred = parse_grounded_answer(stripped, masks, eid)
        elif form == 3:  # text only, no [SEG]
            text = "The chair near the table."
            pred, ok = {"example_id": eid, "a": text, "groundings": []}, True
        elif form == 4:  # [SEG] tokens but no masks: the text counts, the groundings do not
            text = target["answer"]
            pred, ok = {"example_id": eid, "a": text, "groundings": []}, False
        else:  # an image index out of range: dropped when the accumulator refuses it
            masks = target["masks"][:1]
            answer = f"<p>thing</p> [SEG] (IMAGE{n + 5}) here"
            text = json.dumps({"answer": answer, "masks": masks})
            pred, ok = {"example_id": eid, "a": answer, "groundings": []}, False
        out.append((text, pred, ok))
    return out


def test_m4seg_perturbed_answers_equal_the_metric(m4_docs, m4_options):
    """Every answer form, parsed and scored through the accumulator items, gives perckit.m4seg.metric.compute's
    numbers on the same predictions exactly, in any item order."""
    answers = _m4_answers(m4_docs)
    items = [m4u.m4seg_process_results(d, [text])["ss"] for d, (text, _, _) in zip(m4_docs, answers)]
    expected = m4seg_compute([p for _, p, _ in answers], [m4_reference(d) for d in m4_docs], **m4_options)
    assert expected["miou"] < 1.0 and expected["ss"] < 1.0
    want = {k: expected[k] for k in m4u.KEYS if k != "unparsed"}
    want["unparsed"] = sum(1 for _, _, ok in answers if not ok) / len(answers)
    assert _aggregate(m4u, items) == want
    shuffled = list(items)
    random.Random(5).shuffle(shuffled)
    assert _aggregate(m4u, shuffled) == want
    assert [x["form"] for x in items[:6]] == ["json", "groundings", "inline", "text", "text-only", "text-only"]


# ---------------------------------------------------------------- pointing a task at an export


def test_write_task_local_export_hub_id_and_refusals(exports, tmp_path, capsys):
    """A local export, and a local copy of a pushed one (no record: the card names the files), give parquet
    data_files naming its files (which load as the docs); a Hub id gives dataset_path + dataset_name; the written
    YAML is the packaged task with its name and data replaced, its functions those of the packaged utils.py."""
    import shutil

    path = le.write_task("refcoco_m", exports / "refcoco_m", tmp_path / "tasks")
    config = load_task(path)
    packaged = yaml.load(le.task_yaml("refcoco_m").read_text(encoding="utf-8"), Loader=_Loader)
    assert config["test_split"] == "validation" and config["dataset_path"] == "parquet"
    assert config["task"] == path.stem == "refcoco_m_mask_refcoco_m" and "include" not in config
    assert {k for k in config if k not in ("dataset_name",)} == set(packaged)
    assert config["metric_list"][0]["aggregation"] is rcu.refcoco_m_miou and config["process_results"] is rcu.refcoco_m_process_results
    files = config["dataset_kwargs"]["data_files"]["validation"]
    assert files == [str((exports / "refcoco_m" / "data" / "validation-00000-of-00001.parquet").resolve())]
    ds = task_docs(path, tmp_path / "c")
    assert ds.num_rows == 47 and ds[0]["expression_id"]
    hub_path = le.write_task("m4seg", "ORG/m4seg-parquet", tmp_path / "tasks")
    hub = load_task(hub_path)
    assert (hub["dataset_path"], hub["dataset_name"], hub["dataset_kwargs"], hub["task"]) == (
        "ORG/m4seg-parquet", "default", {}, "m4seg_grounded_m4seg_parquet")
    assert hub["doc_to_text"] is m4u.m4seg_doc_to_text and "data_files" not in hub_path.with_suffix(".py").read_text()
    plain = tmp_path / "snapshot"
    shutil.copytree(exports / "m4seg", plain, ignore=shutil.ignore_patterns(".perckit_export.json"))
    local = load_task(le.write_task("m4seg", plain, tmp_path / "tasks", task="mine"))
    assert (local["dataset_path"], local["dataset_name"], local["task"]) == ("parquet", None, "mine")
    assert local["dataset_kwargs"]["data_files"]["test"] == [str(p.resolve()) for p in sorted((plain / "data").glob("test-*.parquet"))]
    with pytest.raises(InputNotFoundError, match="is not a perckit export"):
        le.write_task("m4seg", tmp_path / "tasks", tmp_path / "tasks2")  # a folder with neither record nor card
    with pytest.raises(OptionError, match="expected an export of m4seg"):
        le.write_task("m4seg", exports / "refcoco_m", tmp_path / "tasks")
    with pytest.raises(OptionError, match=r"expected one of the splits \['validation'\], got 'train'"):
        le.write_task("refcoco_m", exports / "refcoco_m", tmp_path / "tasks", split="train")
    with pytest.raises(InputNotFoundError, match="does not exist"):
        le.write_task("refcoco_m", tmp_path / "nowhere", tmp_path / "tasks")
    for bad in ("../escape", "a/b", ".hidden", "t\n"):
        with pytest.raises(OptionError, match="expected a task name of letters"):
            le.write_task("refcoco_m", "ORG/x", tmp_path / "tasks", task=bad)
    for theirs in ("theirs.yaml", "theirs.py"):
        (tmp_path / "tasks" / theirs).write_text("task: theirs\n")
        with pytest.raises(OptionError, match="not written by write_task"):
            le.write_task("refcoco_m", "ORG/x", tmp_path / "tasks", task="theirs")
        (tmp_path / "tasks" / theirs).unlink()
    capsys.readouterr()
    assert le_main.main(["refcoco_m", str(exports / "refcoco_m"), "--output", str(tmp_path / "cli")]) == 0
    assert (tmp_path / "cli" / "refcoco_m_mask_refcoco_m.yaml").is_file() and (tmp_path / "cli" / "refcoco_m_mask_refcoco_m.py").is_file()
    assert capsys.readouterr().out.splitlines()[-1] == (  # the last line: what it wrote and where (issue 33)
        f"wrote the lmms-eval task refcoco_m_mask_refcoco_m (refcoco_m_mask_refcoco_m.yaml and refcoco_m_mask_refcoco_m.py) to {tmp_path / 'cli'}")
    assert le_main.main(["m4seg", str(exports / "refcoco_m"), "--output", str(tmp_path / "cli")]) == 1
    assert le.task_dir("m4seg") == le.task_yaml("m4seg").parent and le.task_dir() == le.TASKS_DIR


def test_a_written_task_folder_holds_no_path_of_the_machine_and_moves(exports, tmp_path, monkeypatch):
    """The YAML and the module write_task writes hold no absolute path and no folder of this machine: the export's
    files are named relative to the task folder. Moved elsewhere with its export, and loaded from another working
    folder, the task still reads the 47 rows."""
    import re
    import shutil

    before = tmp_path / "before"
    shutil.copytree(exports / "refcoco_m", before / "exports" / "refcoco_m")
    path = le.write_task("refcoco_m", before / "exports" / "refcoco_m", before / "tasks")
    for written in (path, path.with_suffix(".py")):
        text = written.read_text(encoding="utf-8")
        assert str(tmp_path) not in text and "/tmp" not in text and not re.search(r"""[\s"'(\[]/""", text), text
    assert "../exports/refcoco_m/data/validation-00000-of-00001.parquet" in path.with_suffix(".py").read_text()
    after = tmp_path / "elsewhere" / "after"
    shutil.move(before, after)
    monkeypatch.chdir(tmp_path)  # lmms-eval runs in some other folder
    moved = after / "tasks" / path.name
    assert load_task(moved)["dataset_kwargs"]["data_files"]["validation"] == [
        str((after / "exports" / "refcoco_m" / "data" / "validation-00000-of-00001.parquet").resolve())]
    docs = task_docs(moved, tmp_path / "cache")
    assert docs.num_rows == 47 and docs["expression_id"] == _docs(exports, "refcoco_m", "validation")["expression_id"]


def test_the_command_line_help_is_plain_text(capsys):
    """python -m perckit.lmms_eval --help shows no reStructuredText markup (double backticks, roles)."""
    import re

    with pytest.raises(SystemExit) as e:
        le_main.main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "perckit.lmms_eval.write_task" in out and "--output" in out
    assert "``" not in out and not re.search(r":[a-z]+:`", out), out


def test_m4seg_answer_past_the_resize_budget_keeps_its_text(m4_docs, m4_options, monkeypatch, caplog):
    """An answer whose masks would be resized to more pixels than one prediction row may (perckit.rle.PIXEL_BUDGET,
    lowered here) is scored as text only: the metric's PredictionError names the grounding, the evaluation goes on."""
    doc = next(d for d in m4_docs if d["groundings"])
    target = json.loads(m4u.m4seg_doc_to_target(doc))
    tiny = [{"size": [1, 1], "counts": "01"} for _ in target["masks"]]  # each resized to its whole image
    monkeypatch.setattr(rle, "PIXEL_BUDGET", 1)
    one = m4u.m4seg_process_results(doc, [json.dumps({"answer": target["answer"], "masks": tiny})])["miou"]
    assert not one["parsed"] and one["form"] == "text-only"
    assert "groundings[0].segmentation: expected at most 1 mask pixels decoded or resized per prediction row" in caplog.text
