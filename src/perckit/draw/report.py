"""``perckit report``: one self-contained HTML page of a run's own samples, worst first.

The samples are the metric's own per-sample rows (the result's list :data:`PAGES` names, with the accumulator's
record where that is a dict: R4D-Bench's per-frame IoUs), ordered by the lowest of the page's score keys in a row
(rows with none last), at most ``max_samples``; each with its groups, text, numbers and pictures where the rows carry
them (:func:`perckit.draw.figures.mask_overlay` with the demo's legend; ReasonAVEdit's waveform and edit windows), at
most :data:`MAX_SIDE` px, encoded as previews and inline as ``data:`` URIs. The group filter is a few lines of inline
script: the page reads no other file and no network. :data:`MARK` says perckit wrote it."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from PIL import Image

from .. import rle
from ..errors import PerckitError
from . import figures, previews

#: The tag in every page's head that marks it as perckit's (:func:`perckit.__main__.check_results_path`).
MARK = '<meta name="generator" content="perckit report">'
#: The long side of a picture at most (a small frame is enlarged to it by an integer factor).
MAX_SIDE = 300
#: The frames drawn for an R4D-Bench query: those of lowest IoU.
MAX_FRAMES = 3


@dataclass(frozen=True)
class Page:
    """A metric's page: ``rows``, the result's per-sample list (``option`` turns it on); ``score``, the keys it is
    ordered by; ``groups``, the filters; ``texts``, the fields quoted; ``draw(sample, reference, prediction, export
    row, frames) -> [(picture or None, caption)]``; ``frames``, the export config with R4D-Bench's frames."""

    id: str
    rows: str
    score: tuple[str, ...]
    groups: tuple[str, ...]
    shows: str
    texts: tuple[str, ...] = ()
    option: str | None = None
    draw: Callable | None = None
    frames: str | None = None


class Frames:
    """An export's ``frames`` config by ``(scene, frame_id)``; a row is decoded only when drawn."""

    def __init__(self, ds: Any) -> None:
        self.ds, self.index = ds, {} if ds is None else {k: i for i, k in enumerate(zip(ds["scene"], ds["frame_id"]))}

    def get(self, scene: str, frame_id: int) -> Mapping:
        return self.ds[self.index[scene, frame_id]] if (scene, frame_id) in self.index else {}


def overlay(image: Any, gt: Any, pred: Any) -> Image.Image | None:
    """``gt`` and ``pred`` (each an RLE, else left out) over ``image`` (None: a neutral canvas); None for neither.
    Its ``info["photo"]`` says whether it is drawn over an image (:func:`data_uri` encodes it as JPEG then)."""
    gt, pred = (m if previews.is_rle(m) else None for m in (gt, pred))
    if gt is None and pred is None:
        return None
    im = figures.mask_overlay(image, gt, pred, scale=max(MAX_SIDE // max((gt or pred)["size"]), 1))
    im.info["photo"] = figures.has_image(image)
    return im


def _r4d_masks(s: Mapping, ref: Mapping, pred: Mapping, row: Mapping, frames: Frames) -> list:
    gt, pr = ({f["frame_id"]: f["mask"] for f in side.get("frames") or []} for side in (ref, pred))
    ious = dict(s.get("frame_ious") or [])
    shown = sorted(ious, key=lambda f: (ious[f], f))[:MAX_FRAMES] or sorted({*gt, *pr})[:MAX_FRAMES]
    return [(overlay(frames.get(s["scene"], f).get("image"), gt.get(f), pr.get(f)), f"frame {f}"
             + (f", IoU {ious[f]:.3f}" if f in ious else "") + ("" if f in pr else ", no predicted mask")) for f in shown]


def _r4d_tracks(s: Mapping, ref: Mapping, pred: Mapping, row: Mapping, frames: Frames) -> list:
    """The first frame of the scene showing a ground-truth or predicted track, each side's tracks as one mask."""
    want, got = (set(side.get("target_track_ids") or ()) for side in (ref, pred))
    tracks = f"ground truth {sorted(want)}, predicted {sorted(got)}"
    for scene, f in sorted(k for k in frames.index if k[0] == s.get("scene")):
        fr = frames.get(scene, f)
        g, p = ([a["segmentation"] for a in fr["annotations"] if a["track_id"] in ids] for ids in (want, got))
        if g or p:
            size = [fr["height"], fr["width"]]
            return [(overlay(fr["image"], g and rle.union(g, size), p and rle.union(p, size)), f"frame {f}; tracks: {tracks}")]
    return [(None, f"no frame of the scene shows a track: {tracks}")]


def _m4seg(s: Mapping, ref: Mapping, pred: Mapping, row: Mapping, frames: Frames) -> list:
    """Each image's groundings, each side's as one mask, over the photo when the row has it (else a neutral canvas)."""
    sides = [[g for g in side.get("groundings") or [] if previews.is_rle(g.get("segmentation"))] for side in (ref, pred)]
    photos, out = row.get("image_files") or [], []
    for k in sorted({g["image_index"] for side in sides for g in side}):
        g, p = ([x["segmentation"] for x in side if x["image_index"] == k] for side in sides)
        size, photo = (g or p)[0]["size"], photos[k - 1] if k <= len(photos) else None
        out.append((overlay(photo, g and rle.union(g, size), p and rle.union(p, size)), f"image {k}"))
    return out


def _av(s: Mapping, ref: Mapping, pred: Mapping, row: Mapping, frames: Frames) -> list:
    from ..reason_av_edit.metric import AudioOptions, decode_wav

    anchor = "anchor frame" + (f" {row['anchor_frame']}" if row.get("anchor_frame") is not None else "")
    out = [(overlay(row.get("reason_visual"), ref.get("anchor_mask"), pred.get("anchor_mask")), anchor)]
    if (ref.get("reason_audio") or {}).get("bytes"):
        key = "edit_window_s"
        wins = [w if isinstance(w, (list, tuple)) and len(w) == 2 else None for w in (ref.get(key), pred.get(key))]
        wave = decode_wav(ref["reason_audio"]["bytes"], s["sample_id"])
        plot = figures.waveform_plot(wave, AudioOptions().sample_rate, *wins, width=MAX_SIDE, height=90)
        out.append((plot, "reasoning audio, edit windows"))
    return out


#: ReasonAVEdit's groups: its metrics report each (per_category, per_sub_track, per_language, per_orientation)
_AV_GROUPS = ("category", "sub_track", "language", "orientation")
#: Each metric's page (the help of ``perckit report`` lists what they show).
PAGES = {
    "mask_temporal": Page("query_id", "per_query", ("miou",), ("scene", "query_type"), "R4D-Bench: each query's three "
                          "lowest-IoU frames (the export's frames config)", ("text_en",), None, _r4d_masks, "frames"),
    "track_id": Page("query_id", "per_query", ("f1",), ("scene",), "R4D-Bench: the first frame showing a ground-truth or "
                     "predicted track", ("text_en",), None, _r4d_tracks, "frames"),
    "refer_iou": Page("expression_id", "per_example", ("iou",), ("category", "supercategory"), "RefCOCO-M: the masks over "
                      "the image", ("sentence",), "return_per_example",
                      lambda s, ref, pred, row, frames: [(overlay(row.get("image"), ref.get("mask"), pred.get("mask")), "")]),
    "m4seg": Page("example_id", "per_sample", ("miou",), ("type", "dataset_name", "granularity"), "M4Seg: each image's "
                  "groundings (over the photo if the export has them)", ("q", "gt_text", "pred_text"), "per_sample", _m4seg),
    "av_reasoning": Page("sample_id", "per_sample", ("visual_iou", "audio_tiou", "video_tiou"), _AV_GROUPS,
                         "ReasonAVEdit-Bench: the anchor frame's masks, the reasoning waveform with both edit windows",
                         ("instruction",), "return_per_sample", _av),
    "av_edit_quality": Page("sample_id", "per_sample", ("ssim",), _AV_GROUPS, "ReasonAVEdit-Bench: the "
                            "scores, no pictures", ("instruction",), "return_per_sample"),
    "syn4d": Page("sequence_id", "sequences", ("score", "delta1", "auc_20deg"), ("variant", "scene"), "Syn4D: the scores, no "
                  "pictures (tracking ordered by score, depth by delta1, pose by auc_20deg)"),
}


def data_uri(im: Image.Image, side: int = MAX_SIDE) -> str:
    """``im`` shrunk to ``side`` as a ``data:`` URI, encoded as a preview (:func:`perckit.draw.previews.encode`):
    JPEG when ``im.info["photo"]`` (an :func:`overlay` over an image), else PNG."""
    photo = bool(im.info.get("photo"))
    if max(im.size) > side:
        im = figures.resized(im, *previews.fit_size(im.height, im.width, side))
    return f"data:image/{'jpeg' if photo else 'png'};base64,{base64.b64encode(previews.encode(im, photo)).decode('ascii')}"


def _worst(s: Mapping, page: Page) -> tuple[float, str] | None:
    """The lowest of the page's score keys in ``s``, as ``(value, key)``; None when ``s`` has none of them."""
    return min(((s[k], k) for k in page.score if isinstance(s.get(k), (int, float))), default=None)


def _section(rank: int, s: Mapping, page: Page, field: Callable[[str], str], drawn: list) -> str:
    e, worst = html.escape, _worst(s, page)
    pics = [(p, c) for p, c in drawn if p is not None]
    head = f"#{rank} {s[page.id]}" + ("" if worst is None else f" \N{EM DASH} {worst[1]} {worst[0]:.4f}")
    return (f"<section style='flex-basis:{max(len(pics), 1) * (MAX_SIDE + 6) + 16}px'"  # its pictures side by side
            + "".join(f' data-g{i}="{e(field(g))}"' for i, g in enumerate(page.groups)) + f"><h2>{e(head)}</h2><p>"
            + " · ".join(f"{e(g)}: <b>{e(field(g))}</b>" for g in page.groups) + "</p>"
            + "".join(f"<p><i>{e(t)}</i>: {e(field(t))}</p>" for t in page.texts)
            + "".join(f"<p>{e(c)}</p>" for p, c in drawn if p is None) + "<div class=pics>"
            + "".join(f"<figure><img src='{data_uri(p)}' alt='{e(c)}'><figcaption>{e(c)}</figcaption></figure>" for p, c in pics)
            + "</div><p class=k>" + "".join(f"<span>{e(k)} <b>{v if isinstance(v, bool) else format(v, '.4g')}</b></span>"
                                             for k, v in s.items() if isinstance(v, (int, float)) and k not in page.groups)
            + "</p></section>")


#: The style of :func:`legend_html` (the demo report's too).
LEGEND_STYLE = ("ul.legend{list-style:none;padding:0;margin:.3em 0;font-size:.9em}ul.legend li{display:inline-block;margin:0 "
                "1.2em .2em 0}.sw{display:inline-block;width:1em;height:1em;box-sizing:border-box;border:2px solid;"
                "vertical-align:-.15em;margin-right:.35em}")


def legend_html(legend: Any) -> str:
    """A legend, ``(label, colour)`` pairs (colour None: a note), as a list of swatches (a mask's light fill and
    outline, :func:`perckit.draw.figures.light`) and labels."""
    sw = "<span class=sw style='background:rgb{};border-color:rgb{}'></span>"
    return ("<ul class=legend>" + "".join(f"<li>{sw.format(figures.light(tuple(c)), tuple(c)) if c else ''}{html.escape(label)}"
                                          "</li>" for label, c in legend) + "</ul>")


_STYLE = (LEGEND_STYLE + "body{font-family:sans-serif;margin:1em .6em}pre{overflow-x:auto}main{display:flex;flex-wrap:wrap;gap:.8em}"
          "section{flex:0 1 auto;max-width:100%;box-sizing:border-box;border:1px solid #ccc;border-radius:4px;padding:0 .6em}"
          "h2{font-size:1.05em;overflow-wrap:anywhere}.pics{display:flex;flex-wrap:wrap;gap:6px}figure{margin:0;max-width:100%}"
          "img{max-width:100%;height:auto}figcaption,.k{font-size:small}.k span{display:inline-block;margin-right:1em}")
_SCRIPT = ("const S=[...document.querySelectorAll('select')],E=[...document.querySelectorAll('section')];"
           "function f(){let n=0;E.forEach(e=>{e.hidden=!S.every(s=>!s.value||e.dataset['g'+s.dataset.i]===s.value);"
           "n+=!e.hidden});document.getElementById('n').textContent=n+' shown'}S.forEach(s=>s.onchange=f);f()")


def render(metric: str, scored: tuple, frames: Any = None, max_samples: int = 200, about: str = "") -> tuple[str, int]:
    """The page of ``scored`` (:func:`perckit.__main__.score_files`) and how many samples it shows; ``frames``: the
    rows of the page's frames config (None: neutral canvases)."""
    from ..hf import tables

    (result, acc, predictions, references, rows, _), page, e = scored, PAGES[metric], html.escape
    records = {k: r for k, r, _ in acc.state_dict()["records"] if isinstance(r, dict)} if acc is not None else {}
    refs, preds = {r[page.id]: (i, r) for i, r in enumerate(references)}, {p[page.id]: p for p in predictions}
    samples = sorted(({**records.get(r[page.id], {}), **r} for r in result.get(page.rows) or []),
                     key=lambda s: (_worst(s, page) is None, _worst(s, page) or (0.0, ""), str(s[page.id])))
    shown, frames, sections, groups = samples[:max_samples], Frames(frames), [], [set() for _ in page.groups]
    for rank, s in enumerate(shown, 1):
        i, ref = refs.get(s[page.id], (None, {}))
        row = rows[i] if rows is not None and i is not None else {}
        field = lambda k: str(next((d[k] for d in (s, ref, row) if d.get(k) is not None), "-"))  # noqa: E731
        for values, g in zip(groups, page.groups):
            values.add(field(g))
        try:
            drawn = page.draw(s, ref, preds.get(s[page.id]) or {}, row, frames) if page.draw else []
        except PerckitError as err:  # a prediction of another size, an undecodable picture: the numbers still show
            drawn = [(None, f"pictures not drawn: {err}")]
        sections.append(_section(rank, s, page, field, drawn))
    legends = [figures.MASK_LEGEND] * bool(page.draw) + [figures.WINDOW_LEGEND] * (page.draw is _av)
    selects = "".join(f"<label>{e(g)} <select data-i={i}><option value=''>all</option>"
                      + "".join(f"<option>{e(v)}</option>" for v in sorted(values)) + "</select></label> "
                      for i, (g, values) in enumerate(zip(page.groups, groups)))
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>" + MARK
            + f"<meta name=viewport content='width=device-width,initial-scale=1'><title>perckit report: {e(metric)}</title>"
            + f"<style>{_STYLE}</style></head><body><h1>perckit report: {e(metric)}</h1><p>{e(page.shows)}. {e(about)}</p><p>"
            + f"{len(shown)} of {len(samples)} samples, worst first by {e(' / '.join(page.score))}"
            + " (the lowest)" * (len(page.score) > 1) + "</p>"
            + "".join(legend_html(lg) for lg in legends)
            + f"<details><summary>results</summary><pre>{e(tables.render(result, 'text', metric))}</pre></details>"
            + f"<p>{selects}<span id=n></span></p><main>{''.join(sections)}</main><script>{_SCRIPT}</script>"
            + "</body></html>"), len(shown)
