"""The benchmarks perckit knows: one descriptor each (:class:`perckit.hf.descriptor.Benchmark`), declared here
with the functions it names imported directly from the benchmark's package. ``perckit list``, ``perckit
convert``, ``perckit evaluate``, ``perckit.load_dataset``, the accumulators, the builders and the sample
releases read them from here; nothing else keeps a list of benchmarks or metrics. The builder classes, which
import ``datasets``, are found by name in :func:`perckit.hf.entrypoints.builder_class`.
"""

from __future__ import annotations

from functools import partial
from types import ModuleType

from ..errors import OptionError
from ..m4seg import accumulate as m4seg, features as m4seg_features, preview as m4seg_preview
from ..r4d_bench import accumulate as r4d, features as r4d_features, preview as r4d_preview
from ..reason_av_edit import accumulate as rave, features as rave_features, preview as rave_preview
from ..reason_av_edit.quality import metric as quality, predictions as quality_files
from ..reason_av_edit.quality.references import to_quality_reference
from ..reason_av_edit.read import predictions as rave_files
from ..refcoco_m import accumulate as refcoco, features as refcoco_features, preview as refcoco_preview
from ..syn4d import accumulate as syn4d, features as syn4d_features, preview as syn4d_preview, read as syn4d_read
from .descriptor import Benchmark, MetricSpec, PredictionFolder


def _reason_av_edit_export() -> ModuleType:
    from ..reason_av_edit import export  # imports datasets: only when an export is written or read back

    return export


_R4D_SCORES = "all_queries / subset_36"

#: Every benchmark, in the order they are shown.
BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in (
    Benchmark(
        "r4d_bench", "R4D-Bench (referring segmentation in dynamic 4D scenes)", "R4D-Bench", ("test",),
        "LiYacheng/r4d-bench-qa", preview=r4d_preview.make_previewer,
        description=(
            "R4D-Bench (referring segmentation in dynamic 4D scenes): spatio-temporal referring segmentation on 12 "
            "HyperNeRF / Neu3D scenes, 89 bilingual (English / Chinese) queries with dense per-frame mask ground truth, "
            "an optional 36-query subset, and the COCO-annotated scene frames. Not NVIDIA's region-prompted VQA "
            "benchmark of the same name. Masks are compressed COCO RLE {size: [H, W], counts: str}."
        ),
        citation=(
            "Cite the R4D-Bench dataset repository (https://huggingface.co/datasets/LiYacheng/r4d-bench-qa) and the "
            "original scene datasets (HyperNeRF, Neu3D / DyNeRF, Roboflow sources)."
        ),
        license=(
            "other: annotations and code as released (no top-level licence yet); scene imagery stays under the "
            "Neu3D / HyperNeRF / Roboflow terms."
        ),
        metrics=(
            MetricSpec("mask_temporal", r4d_features.to_metric_reference, r4d.mask_temporal_core, scores=_R4D_SCORES,
                       gt_prediction=r4d_features.to_metric_prediction),
            MetricSpec("track_id", r4d_features.to_track_reference, r4d.track_id_core, scores=_R4D_SCORES,
                       gt_prediction=r4d_features.to_track_prediction),
        ),
    ),
    Benchmark(
        "syn4d", "Syn4D (3D point tracking, video depth and camera pose on synthetic dynamic scenes)", "Syn4D",
        ("test",), "Syn4D/Syn4D_Benchmark", preview=syn4d_preview.make_previewer,
        description=(
            "Syn4D: 4D reconstruction on synthetic Unreal-rendered dynamic scenes, 512 sequences (4 variants x 8 scenes "
            "x 8 base sequences x 2 cameras), scored on 32 source frames (0, 6, ..., 186): 3D point tracking of 512 "
            "frame-0 queries in frame-0 OpenCV camera coordinates, video depth, and camera pose."
        ),
        citation="Cite the Syn4D benchmark (https://huggingface.co/datasets/Syn4D/Syn4D_Benchmark) and its evaluator "
                 "(jzr99/Syn4D_benchmark).", license="See the Syn4D dataset card.",
        metrics=(MetricSpec(
            "syn4d", syn4d_features.to_metric_reference, syn4d.syn4d_core, ("tracking", "depth", "pose"),
            scores="tracking (config tracking); depth and pose (config challenge)",
            file_format="the official per-sequence NPZ files, one <variant>/<scene>/<sequence_id>.npz each "
                        "(perckit evaluate syn4d, or python -m perckit.syn4d.evaluate on the release)",
            folder=PredictionFolder("sequence_id", partial(syn4d_read.load_prediction_rows, as_lists=False),
                                    syn4d_read.write_gt_predictions)),),
    ),
    Benchmark(
        "refcoco_m", "RefCOCO-M (referring expression segmentation)", "RefCOCO-M", ("validation",),
        "moondream/refcoco-m", preview=refcoco_preview.make_previewer,
        description=(
            "RefCOCO-M: the RefCOCO (UNC) validation split for referring expression segmentation with re-segmented, "
            "pixel-accurate instance masks and harmful expressions removed (1,190 images, 2,080 instance masks, 5,598 "
            "referring expressions). Masks are compressed COCO RLE {size: [H, W], counts: str}."
        ),
        citation="Cite the RefCOCO-M dataset card (https://huggingface.co/datasets/moondream/refcoco-m) and RefCOCO "
                 "(Yu et al., ECCV 2016).", license="mit",
        metrics=(MetricSpec("refer_iou", refcoco_features.to_metric_reference, refcoco.refer_iou_core,
                            scores="expressions", gt_prediction=refcoco_features.to_metric_prediction),),
    ),
    Benchmark(
        "m4seg", "M⁴Seg (multi-image pixel-grounded reasoning segmentation)", "M4Seg", ("train", "test"),
        "kanguyen-vn/M4Seg", preview=m4seg_preview.make_previewer,
        description=(
            "M4Seg: multi-image pixel-grounded reasoning (PRIMA, WACV 2027). Each example pairs two or three ordered "
            "images with a question and an answer whose entity codes (chair_102, leg_20103) link phrases to object or "
            "part groundings, each with a 1-based image_index, an answer_span, a bbox and a compressed COCO RLE mask "
            "{size: [H, W], counts: str}. Splits: train (743,463 examples) and test (1,000). Images are not shipped."
        ),
        citation="""\
@inproceedings{nguyen2027prima,
  title     = {PRIMA: Multi-Image Vision-Language Models for Reasoning Segmentation},
  author    = {Nguyen, Kiet A. and Wahed, Muntasir and Juvekar, Adheesh Sunil and Li, Xinzhuo and Zhou, Xiaona and
               Shah, Vedant and Yu, Tianjiao and Yanardag, Pinar and Lourentzou, Ismini},
  booktitle = {Proceedings of the IEEE/CVF Winter Conference on Applications of Computer Vision},
  year      = {2027}
}""",
        license="cc-by-4.0 (new annotations); inherited masks and images keep their upstream terms",
        metrics=(MetricSpec("m4seg", m4seg_features.to_metric_reference, m4seg.m4seg_core,
                            scores="default (test split)", gt_prediction=m4seg_features.gt_as_prediction),),
    ),
    Benchmark(
        "reason_av_edit", "ReasonAVEdit-Bench (audio-video edit reasoning)", "ReasonAVEdit-Bench", ("test",),
        "bigfacing/ReasonAVEdit-Bench", preview=rave_preview.make_previewer, export_hook=_reason_av_edit_export,
        description=(
            "ReasonAVEdit-Bench: 1,200 samples for instruction-guided joint audio-video editing in 16 sub-tracks over 5 "
            "categories (where / which / when / combined / reference). Each sample has a source clip (25 fps, H.264 + 16 "
            "kHz AAC), its 16 kHz mono audio, an instruction (zh or en), a full-timeline target mask video, single-frame "
            "visual reasoning GT (anchor frame with the target at gray 127, plus its binary mask) and full-timeline "
            "acoustic reasoning GT (a waveform silent outside the edit window). No edited target is provided."
        ),
        citation="Cite the ReasonAVEdit-Bench dataset card (https://huggingface.co/datasets/bigfacing/ReasonAVEdit-Bench).",
        license="other: research-only (see the release's LICENSE); source material may restrict redistribution",
        metrics=(
            MetricSpec("av_reasoning", rave_features.to_metric_reference, rave.av_reasoning_core, scores="default",
                       file_format="a folder of <sample_id>.json, <sample_id>_anchor_mask.png, _reason_audio.wav and "
                       "_mask.mp4 files (perckit.reason_av_edit.load_predictions_dir)",
                       folder=PredictionFolder("sample_id", rave_files.load_predictions_dir, rave_files.write_gt_predictions)),
            MetricSpec("av_edit_quality", to_quality_reference, scores="default", compute=quality.av_edit_quality,
                       file_format="a folder of edited clips <sample_id>.mp4 with optional <sample_id>.wav "
                       "(perckit.reason_av_edit.load_quality_predictions_dir)",
                       folder=PredictionFolder("sample_id", quality_files.load_quality_predictions_dir,
                                               quality_files.write_gt_quality_predictions)),
        ),
    ),
)}
NAMES = tuple(BENCHMARKS)


def get(name: str) -> Benchmark:
    """The descriptor of benchmark ``name``; an unknown name is an :class:`OptionError` listing the known ones."""
    if name not in BENCHMARKS:
        raise OptionError(f"unknown benchmark {name!r}: expected one of {sorted(NAMES)}")
    return BENCHMARKS[name]


def metrics() -> dict[str, tuple[Benchmark, MetricSpec]]:
    """Every metric name -> (its benchmark, its spec)."""
    return {m.name: (b, m) for b in BENCHMARKS.values() for m in b.metrics}


def metric(name: str) -> tuple[Benchmark, MetricSpec]:
    table = metrics()
    if name not in table:
        raise OptionError(f"unknown metric {name!r}: expected one of {sorted(table)}")
    return table[name]

