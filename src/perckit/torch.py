"""perckit in PyTorch loops: masks as ``torch.bool`` tensors, and accumulators merged across a process group.

Imported only when used (``import perckit.torch``; ``import perckit`` never imports it, nor torch).

- :func:`collate`: a ``DataLoader`` ``collate_fn`` for every config of every builder. A batch is a dict of lists
  (one entry per row: images, masks and arrays differ in size from row to row, so nothing is stacked), and every
  COCO RLE value in it, at any nesting (``mask``, ``frames[].mask``, ``groundings[].segmentation``, ``anchor_mask``...), is
  decoded to a ``torch.bool`` tensor ``[H, W]``; a "not provided" marker (``size: []``) becomes ``None``.
- :func:`masks_transform`: the same decoding as a ``datasets`` transform (``ds.with_transform(masks_transform())``):
  only the rows read are decoded, when they are read. PyTorch's default collate does not fit these rows, with or
  without it (see :func:`masks_transform` for what does).

Every call decodes at most ``max_pixels`` mask pixels in all (default :data:`perckit.rle.PIXEL_BUDGET`, 2^30: a
GiB of ``torch.bool``): the declared sizes of all the batch's RLE values are summed first (one
:class:`perckit.rle.PixelBudget` per batch), and a batch past the budget is refused before anything is decoded, an
:class:`~perckit.errors.RLEError` naming the mask that passes it (``row 0: frames[3].mask``). Raise it for larger
batches: ``functools.partial(perckit.torch.collate, max_pixels=2**32)``, ``masks_transform(max_pixels=2**32)``.
- :func:`gather`: the accumulators of every rank of a ``torch.distributed`` group merged into one, on every rank.

The reverse direction, predicted masks to RLE for ``update()``, is :func:`perckit.rle.encode_masks` (it takes a
tensor on any device).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from . import rle
from .hf.accumulate import Accumulator
from .errors import OptionError, PredictionError, ReleaseFormatError

__all__ = ["collate", "decode_masks", "gather", "masks_transform", "MasksTransform"]


def _is_rle(value: Any) -> bool:
    """A COCO RLE value: a mapping with both ``size`` and ``counts``."""
    return isinstance(value, Mapping) and "size" in value and "counts" in value


def _size_list(size: Any) -> Any:
    """``size`` as a plain list when a tensor or array holds it (a torch- or numpy-formatted dataset)."""
    return size.tolist() if isinstance(size, (torch.Tensor, np.ndarray)) else size


def _decode_rle(value: Mapping, where: str) -> torch.Tensor | None:
    """One RLE value to a ``torch.bool`` tensor [H, W] (validated first: pycocotools loops forever on counts that
    do not sum to H*W); ``None`` for the "not provided" marker ``size: []``. The caller has charged its budget."""
    size = _size_list(value["size"])
    if isinstance(size, (list, tuple)) and len(size) == 0:
        return None
    checked = rle.to_rle({"size": size, "counts": value["counts"]}, where=where)
    return torch.from_numpy(np.ascontiguousarray(rle.decode(checked)))


def _charge(value: Any, where: str, budget: rle.PixelBudget) -> None:
    """Charge ``budget`` with the declared H * W of every RLE value in ``value`` (the walk of :func:`_decode`),
    before anything is decoded: a bad size is the :class:`~perckit.errors.RLEError` the decoding would raise."""
    if _is_rle(value):
        size = _size_list(value["size"])
        if not (isinstance(size, (list, tuple)) and len(size) == 0):
            budget.charge(rle.mask_pixels({"size": size}, where), where)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            _charge(v, f"{where}.{k}", budget)
    elif isinstance(value, (list, tuple)) and not set(map(type, value)) <= _LEAF_TYPES:
        for i, v in enumerate(value):
            _charge(v, f"{where}[{i}]", budget)


def _decode(value: Any, where: str) -> Any:
    if _is_rle(value):
        return _decode_rle(value, where)
    if isinstance(value, Mapping):
        return {k: _decode(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if set(map(type, value)) <= _LEAF_TYPES:  # a list of numbers or strings (an array's row): nothing to decode
            return list(value)
        return [_decode(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _budget(max_pixels: int | None, who: str) -> rle.PixelBudget:
    """The pixel budget of one call of ``perckit.torch.<who>`` (a batch for collate and the transform)."""
    unit = "call of perckit.torch.decode_masks" if who == "decode_masks" else f"batch of perckit.torch.{who}"
    return rle.PixelBudget(max_pixels, unit=unit, hint=f"pass max_pixels=... to perckit.torch.{who} to raise it")


def decode_masks(value: Any, where: str = "row", max_pixels: int | None = None) -> Any:
    """``value`` (a row, a column value, any nesting of mappings and lists) with every COCO RLE value decoded to a
    ``torch.bool`` tensor ``[H, W]`` and every "not provided" marker (``size: []``) turned into ``None``; everything
    else is returned as it is (mappings and lists are copied, their leaves are not). An invalid RLE is an
    :class:`~perckit.errors.RLEError` naming its place (``where`` and the path inside the value), and so is a value
    whose masks declare more than ``max_pixels`` pixels in all (default :data:`perckit.rle.PIXEL_BUDGET`), refused
    before any is decoded."""
    _charge(value, where, _budget(max_pixels, "decode_masks"))
    return _decode(value, where)


_LEAF_TYPES = frozenset((int, float, bool, str, bytes, type(None)))


def collate(rows: Sequence[Mapping], max_pixels: int | None = None) -> dict[str, list]:
    """A ``torch.utils.data.DataLoader`` ``collate_fn`` for the rows of any perckit builder config: a dict mapping
    each column to the list of its values in row order, with :func:`decode_masks` applied (RLE values become
    ``torch.bool`` tensors, "not provided" markers ``None``). Nothing is stacked, scalars included: rows differ in
    image size, mask size and list lengths. Every row must have the same columns (``max_pixels``: module docstring)."""
    budget = _budget(max_pixels, "collate")
    rows = list(rows)
    if not rows:
        return {}
    columns = list(rows[0]) if isinstance(rows[0], Mapping) else []
    for i, row in enumerate(rows):  # each row checked, then its masks' pixels charged (nothing decoded yet)
        if not isinstance(row, Mapping):
            raise ReleaseFormatError(f"perckit.torch.collate: row {i}: expected a mapping of columns (a datasets row), "
                                     f"got {type(row).__name__}")
        if set(row) != set(columns):
            raise ReleaseFormatError(f"perckit.torch.collate: row {i}: expected the columns of row 0 {sorted(columns)}, "
                                     f"got {sorted(row)}")
        for c in columns:
            _charge(row[c], f"row {i}: {c}", budget)
    return {c: [_decode(row[c], f"row {i}: {c}") for i, row in enumerate(rows)] for c in columns}


class MasksTransform:
    """The callable :func:`masks_transform` returns (a class, so that a ``DataLoader`` with worker processes can
    pickle the dataset it is set on)."""

    def __init__(self, columns: Sequence[str] | None = None, max_pixels: int | None = None) -> None:
        rle.check_max_pixels(max_pixels)  # refused here, not at the first batch
        self.max_pixels = max_pixels
        if isinstance(columns, str):
            columns = [columns]
        if columns is not None:
            columns = list(columns)
            bad = [c for c in columns if not isinstance(c, str)]
            if bad:
                raise OptionError(f"perckit.torch.masks_transform: columns must be column names (str), got {bad!r}")
        self.columns = columns

    def __call__(self, batch: Mapping[str, list]) -> dict[str, list]:
        if not isinstance(batch, Mapping):
            raise ReleaseFormatError(f"perckit.torch.masks_transform: expected a batch (a dict of columns), got {type(batch).__name__}")
        names = list(batch) if self.columns is None else self.columns
        missing = [c for c in names if c not in batch]
        if missing:
            raise OptionError(f"perckit.torch.masks_transform: columns {missing} are not in the batch; its columns are {sorted(batch)}")
        budget = _budget(self.max_pixels, "masks_transform")
        for c in names:
            for i, v in enumerate(batch[c]):
                _charge(v, f"{c}[{i}]", budget)
        return {**batch, **{c: [_decode(v, f"{c}[{i}]") for i, v in enumerate(batch[c])] for c in names}}

    def __repr__(self) -> str:
        budget = "" if self.max_pixels is None else f", max_pixels={self.max_pixels!r}"
        return f"perckit.torch.masks_transform(columns={self.columns!r}{budget})"


def masks_transform(columns: Sequence[str] | None = None, max_pixels: int | None = None) -> MasksTransform:
    """A transform for ``datasets.Dataset.with_transform``: the rows of each batch read from the dataset have their
    COCO RLE values decoded to ``torch.bool`` tensors ``[H, W]`` ("not provided" markers to ``None``), in
    ``columns`` (default: every column; a name not in the batch is an :class:`~perckit.errors.OptionError`). Lazy:
    ``with_transform`` runs it on the rows accessed only, each time they are accessed; ``max_pixels``: per batch.

    Where it fits: reading rows (``ds[i]``, slices, iteration) and a ``DataLoader`` with
    ``collate_fn=perckit.torch.collate`` (the decoded tensors pass through it unchanged) or with ``batch_size=None``
    (one row at a time: torch's ``default_convert`` leaves it as it is). torch's ``default_collate`` (a batch size and
    no ``collate_fn``) stacks every column and fails on these rows: images are PIL images, masks and images differ in
    size from row to row, lists (``frames``, ``groundings``) in length, and a "not provided" mask is ``None``."""
    return MasksTransform(columns, max_pixels)


def gather(acc: Accumulator, group: Any = None) -> Accumulator:
    """The accumulators of every rank of ``group`` (default: the whole ``torch.distributed`` world) merged into a
    new accumulator, returned on every rank (``acc`` is left as it is). Each rank's :meth:`Accumulator.state_dict`
    travels by ``torch.distributed.all_gather_object`` (so every rank must call ``gather``, like any collective;
    with NCCL, set each rank's CUDA device first, as ``all_gather_object`` requires) and the states are merged in
    rank order; the numbers do not depend on that order. A prediction and its reference may be on different ranks.

    Raises :class:`~perckit.errors.OptionError` when torch.distributed is not initialised (call
    ``torch.distributed.init_process_group`` first; or, for jobs that share no process group, ``acc.save(path)`` on
    each and :func:`perckit.hf.accumulate.merge_files`) or when the ranks' metrics, configs or options differ, and
    :class:`~perckit.errors.PredictionError` when an id was scored on two ranks, on every rank alike.
    """
    import torch.distributed as dist

    if not isinstance(acc, Accumulator):
        raise OptionError(f"perckit.torch.gather: expected a perckit Accumulator (perckit.hf.accumulate.accumulator(...)), "
                          f"got {type(acc).__name__}")
    if not dist.is_available() or not dist.is_initialized():
        raise OptionError("perckit.torch.gather: torch.distributed is not initialised: call "
                          "torch.distributed.init_process_group(...) first (torchrun provides its environment); for jobs "
                          "that share no process group, save each accumulator (acc.save(path)) and merge the files "
                          "(perckit.hf.accumulate.merge_files(paths))")
    states: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(states, acc.state_dict(), group=group)
    merged = Accumulator(acc.core, acc.options)
    for rank, state in enumerate(states):
        part = Accumulator(acc.core, acc.options).load_state_dict(state, where=f"perckit.torch.gather: rank {rank}")
        try:
            merged.merge(part)
        except PredictionError as e:
            raise PredictionError(
                f"perckit.torch.gather: rank {rank}: {e}; each item must be scored on one rank only (torch's "
                "DistributedSampler repeats rows to even out the shards unless drop_last=True: shard with "
                "datasets.distributed.split_dataset_by_node, or a sampler that does not pad)") from None
    return merged
