"""The export preview of ReasonAVEdit-Bench (:mod:`perckit.draw.previews`): the source video's anchor frame
(``anchor_frame``, else the first frame) with the edited region (``anchor_mask``: light fill + outline). A row with
no anchor mask (a "not provided" marker, an empty size, null) shows the frame alone with a caption saying so;
a row with no video shows a neutral canvas with a caption. The video is read by :func:`perckit.io.media.video_frames`
(PyAV, after its declared size, length and duration are checked).
"""

from __future__ import annotations

from typing import Any, Mapping

from PIL import Image

from ..draw import previews
from ..io.media import video_frames
from .layout import MAX_MEDIA_FILE_BYTES


def video_frame(video: Any, index: int, where: str) -> Image.Image | None:
    """Frame ``index`` (0-based; the last frame when the video is shorter) of a ``{bytes, path}`` video value."""
    last = None
    with video_frames(video, where, MAX_MEDIA_FILE_BYTES) as frames:
        for i, last in enumerate(frames or ()):
            if i >= index:
                break
        return last.to_image().convert("RGB") if last is not None else None


def row_preview(row: Mapping[str, Any]) -> bytes:
    where = f"ReasonAVEdit-Bench sample {row.get('sample_id')!r}"
    index = row.get("anchor_frame") if isinstance(row.get("anchor_frame"), int) and row.get("anchor_frame") >= 0 else 0
    frame = video_frame(row.get("video"), index, where)
    mask = row.get("anchor_mask")
    if frame is None:
        return previews.blank("no source video")
    size = [frame.height, frame.width]
    has_mask = previews.is_rle(mask) and list(mask["size"]) == size
    out_h, out_w = previews.fit_size(*size)
    canvas = frame.resize((out_w, out_h), Image.NEAREST if out_w >= frame.width else Image.BILINEAR)
    drawn = [(previews.small_mask(mask, out_h, out_w, f"{where}: anchor_mask"), previews.object_colour(0))] if has_mask else []
    im = Image.fromarray(previews.tile(canvas, drawn, out_h, out_w))
    if not has_mask:
        im = previews.with_note(im, f"frame {index}: no anchor mask for this sample")
    return previews.encode(im, photo=True)


def make_previewer(builder: Any, config: str) -> previews.Previewer | None:
    """The previewer of the ``default`` config."""
    if config != "default":
        return None
    return previews.Previewer(row_preview, ("sample_id", "video", "anchor_mask", "anchor_frame"), "reason_av_edit/default",
                              legend=lambda row: previews.mask_legend(["anchor_mask: the region to edit, on the source video's anchor frame"]))
