"""``perckit`` / ``python -m perckit``: list, convert, push, evaluate, report, compare, gt-predictions, demo, write-sample.

A command that writes files ends with one line on stdout naming what it wrote and where (``--quiet`` silences the
progress bars only, never that line)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from .errors import InputNotFoundError, OptionError, PredictionError
from .hf import tables
from .hf.cli import DATA_DIR_HINT, exit_code, progress, progress_bars, run_guarded, write_json
from .hf.tables import FORMATS, RUN_KEY
from .io.paths import atomic_file, read_regular_file, writable_folder


def _kv(items: Sequence[str] | None) -> dict[str, Any]:
    """``key=value`` options; values parsed as JSON when they can be (numbers, true/false, lists)."""
    from .io.jsonio import DuplicateKeyError, loads

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise OptionError(f"--option {item!r}: expected key=value")
        if key in out:
            raise OptionError(f"--option {item!r}: expected each option once, got {key!r} again")
        try:
            out[key] = loads(value)
        except DuplicateKeyError as e:
            raise OptionError(f"--option {item!r}: {e}") from None
        except (ValueError, RecursionError):
            out[key] = value
    return out


#: The largest prediction / reference file ``perckit evaluate`` reads (the whole file is parsed in memory).
MAX_ROWS_FILE_BYTES = 2 << 30


def _read_rows(path: str) -> list[dict]:
    """JSON Lines (one row a line) or a JSON array of rows; every row must be a JSON object. Both forms are read by
    the checked readers (:func:`perckit.io.jsonio.iter_json_lines`, :func:`perckit.io.jsonio.read_json`) under
    :data:`MAX_ROWS_FILE_BYTES`. Errors: :class:`~perckit.errors.InputNotFoundError` for a missing file, and
    :class:`~perckit.errors.PredictionError` naming the file (and line) for anything unreadable."""
    from .io.jsonio import iter_json_lines, read_json
    from .io.prefetch import gc_paused

    p = Path(path)
    if p.suffix == ".jsonl":  # the one JSON Lines reader (its rules and messages: perckit.io.jsonio.iter_json_lines)
        lines = iter_json_lines(p, repr(path), PredictionError, MAX_ROWS_FILE_BYTES, InputNotFoundError)
        with gc_paused():  # as read_json parses: many containers, no cycles (a third of the time went to collections)
            return [row for _, _, row in progress(lines, f"reading {path}", unit="row")]
    data = read_json(p, error=PredictionError, not_found=InputNotFoundError, limit=MAX_ROWS_FILE_BYTES)
    if not isinstance(data, list):
        raise PredictionError(f"{path!r}: expected a JSON array of rows (or a .jsonl file), got {type(data).__name__}")
    for i, row in enumerate(data):
        if not isinstance(row, dict):
            raise PredictionError(f"{path!r}: row {i}: expected a JSON object, got {type(row).__name__}")
    return data


def _convert_all(args: argparse.Namespace, output: str, before_build: Callable[[], object] = lambda: None) -> None:
    from .export import check_options, convert

    configs = args.config or [None]
    check_options(args.benchmark, args.data_dir, configs, output, args.max_shard_size, args.cache_dir)  # before any build
    before_build()
    for config in configs:
        convert(args.benchmark, args.data_dir, config, output, max_shard_size=args.max_shard_size, cache_dir=args.cache_dir,
                preview=args.preview)


def cmd_convert(args: argparse.Namespace) -> int:
    """Build CONFIG of BENCHMARK from the release at --data-dir and write it into --output as a Hub dataset the
    Dataset Viewer can show: data/<split>-*.parquet for the default config, <config>/<split>-*.parquet for the
    others (page index, row groups of at most 100 MB, a 'preview' picture column) and a README.md card for a Hub
    reader listing every converted config. Converting another config into the same folder keeps the first. Without
    --data-dir the release is fetched from the Hub."""
    _convert_all(args, args.output)
    print(f"export ready in {args.output} (README.md has the configs and dataset_info); load it with "
          f"datasets.load_dataset({str(args.output)!r}, <config>)")
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    """Check the Hub login, convert (unless --skip-convert) and upload the export to --repo-id, a private repository
    unless --public, with huggingface_hub's folder upload (resumable, batched commits, unchanged files skipped): the
    files its record lists, then the card in its own commit. Re-running after an interruption resumes; nothing on
    the Hub is ever deleted."""
    from .export.push import check_account, check_public, push_export

    output = args.output or f"build/export/{args.benchmark}"
    if args.skip_convert:
        check_account(args.repo_id, args.token)  # the login before reading the export
    else:  # the licence, then the options, then the login: all before converting
        check_public(args.benchmark, args.public, args.i_may_redistribute)
        _convert_all(args, output, before_build=lambda: check_account(args.repo_id, args.token))
    push_export(output, args.repo_id, configs=args.config, token=args.token, revision=args.revision, public=args.public,
                large=args.large, may_redistribute=args.i_may_redistribute)  # it prints what it sent
    return 0


def check_results_path(path: str, kind: str = "results") -> Path:
    """``--output`` of ``perckit evaluate`` (``kind="results"``), ``report`` or ``gt-predictions``, checked before
    any work: a file path whose folder can be written, and no file perckit did not write (an existing file must be
    an earlier results file, or a page with :data:`perckit.draw.report.MARK`; predictions only go to a new path)."""
    from .draw.report import MARK

    out = Path(path)
    if out.is_dir():
        raise OptionError(f"--output {path!r}: expected a {kind} file path, got a folder")
    if (out.exists() or out.is_symlink()) and kind == "predictions":
        raise OptionError(f"--output {path!r}: expected a new file, got one that exists; choose another path")
    if out.exists() or out.is_symlink():
        try:  # an earlier results file (with its perckit_run record), or a page with perckit's tag
            data = read_regular_file(out, f"--output {path!r}", 1 << 28, OptionError)
            ours = MARK.encode() in data[:4096] if kind == "report" else isinstance(json.loads(data).get(RUN_KEY), dict)
        except (OSError, ValueError, TypeError, AttributeError, RecursionError):  # a perckit error too: not a file it wrote
            ours = False
        if not ours:
            raise OptionError(f"--output {path!r}: expected a new file or an earlier perckit {kind} file, got a file perckit did not write; choose another path")
    parent = out.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not writable_folder(parent):
        raise OptionError(f"--output {path!r}: expected a path in a writable folder, got one under {str(parent)!r}, which cannot be written")
    return out


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def run_record(args: argparse.Namespace, options: dict, fingerprint: str | None, split: str | None) -> dict:
    """What a results file says beside the numbers: versions, inputs, options, the dataset's fingerprint, the time."""
    import datetime

    from . import __version__

    v = _dist_version
    return {
        "perckit": __version__, "datasets": v("datasets"), "evaluate": v("evaluate"), "python": sys.version.split()[0],
        "metric": args.metric, "config": args.config, "options": options,
        "predictions": str(Path(args.predictions).resolve()), "references": str(Path(args.references).resolve()),
        "dataset_config": args.dataset_config, "split": split, "dataset_fingerprint": fingerprint,
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def pick_split(splits: Sequence[str], asked: str | None, where: str) -> str:
    """The split to score: the one asked for, else the only one, else ``test``; an error names the choices."""
    if asked is not None:
        if asked not in splits:
            raise OptionError(f"--split {asked!r}: {where} has the splits {list(splits)}")
        return asked
    if len(splits) == 1:
        return splits[0]
    if "test" in splits:
        return "test"
    raise OptionError(f"--split: {where} has the splits {list(splits)}; pass one with --split")


def _models(items: Sequence[str] | None, metric: str, options: dict) -> None:
    """``--model NAME=PATH`` (repeatable) as ``av_edit_quality``'s ``models`` option (local weights)."""
    if items and (metric != "av_edit_quality" or "models" in options):
        raise OptionError(f"--model: expected the metric av_edit_quality without --option models=..., got {metric!r}"
                          + (" with --option models" if "models" in options else ""))
    for item in items or []:
        name, sep, path = item.partition("=")
        models = options.setdefault("models", {})
        if not (sep and name and path) or name in models:
            raise OptionError(f"--model {item!r}: expected NAME=PATH, each NAME once (names: the metric card's models)")
        models[name] = path


def score_files(args: argparse.Namespace, options: dict, keep: bool = False) -> tuple:
    """The scoring ``perckit evaluate`` and ``report`` run: ``--predictions`` (rows, or the benchmark's prediction
    folder, read by its reader for each reference) against ``--references`` (rows, or an export's rows projected onto
    the metric's keys), through the accumulator (a reference at a time beside a prediction folder, else
    :data:`~perckit.hf.accumulate.ROWS_PER_UPDATE` at a time), the scoring engine itself (av_edit_quality:
    the function its evaluate module calls); ``evaluate`` is never imported. ``(result, accumulator or None,
    predictions, references, the export's rows and split or None)``; the predictions read from a folder and the
    references are kept only with ``keep`` (the report draws them)."""
    from .hf.benchmark import metric as lookup

    bench, spec = lookup(args.metric)  # an OptionError naming the known metrics
    folder = spec.folder if spec.folder is not None and Path(args.predictions).is_dir() else None
    predictions = [] if folder else _read_rows(args.predictions)
    rows = split = None
    if Path(args.references).is_dir():  # an export folder (or any dataset folder): project builder rows
        rows, split = load_rows(args.references, args.dataset_config, args.split, bench.name)
        references = map(spec.projector(args.config), progress(rows, f"reading {args.references}", unit="row"))
    else:
        references = _read_rows(args.references)
    if keep or spec.core is None:
        references = list(references)
    if spec.core is None:  # av_edit_quality (a model library only for a model it runs)
        if folder:
            predictions = folder.read(args.predictions, [r.get(folder.key) for r in references])
        return spec.compute(predictions, references, **options), None, predictions, references, rows, split
    from .hf.accumulate import ROWS_PER_UPDATE, accumulator
    from .io.prefetch import batched

    acc = accumulator(args.metric, args.config, **options).update(None if folder else predictions)
    # beside a folder, one pair per update: the bar counts the references (an update's own bar is for more than one pair)
    scored = progress(references, f"scoring {args.metric}", unit="reference") if folder else references
    for refs in batched(scored, 1 if folder else ROWS_PER_UPDATE):
        acc.update(None, refs)  # a reference's id checked before its prediction file is looked for
        if folder:
            read = folder.read(args.predictions, [refs[0][folder.key]])
            acc.update(read)
            if keep:
                predictions += read
    return acc.compute(), acc, predictions, references, rows, split


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Score predictions against reference rows (.jsonl / JSON array already in the metric's reference schema) or
    against a dataset folder such as a perckit export, whose rows are projected onto the metric's keys. Predictions
    are rows (.jsonl or a JSON array) or, for syn4d, av_reasoning and av_edit_quality, the benchmark's own
    prediction folder, read by its reader for each reference: syn4d the official <variant>/<scene>/<sequence>.npz
    files (the metric's options and numbers of python -m perckit.syn4d.evaluate, one --config task at a time),
    av_reasoning <sample_id>.json, _anchor_mask.png, _reason_audio.wav, _mask.mp4, av_edit_quality <sample_id>.mp4
    (+ .wav). Scoring goes through the metric's accumulator (av_edit_quality: the function its evaluate module
    calls) and never imports evaluate; torch or transformers only for an av_edit_quality model metric."""
    if args.compare_baselines and args.metric != "syn4d":
        raise OptionError(f"--compare-baselines: expected the metric syn4d (the only one with a published baseline table), got {args.metric!r}")
    options = _kv(args.option)
    _models(args.model, args.metric, options)
    output = check_results_path(args.output) if args.output else None
    result, _, _, _, rows, split = score_files(args, options)
    print(tables.render(result, args.format, f"{args.metric}" + (f" ({args.config})" if args.config else "")))
    if args.compare_baselines:  # Syn4D: the card's published baselines with this run as one more row
        from .syn4d.metric.baselines import format_comparison
        print(format_comparison(result))
    if output is not None:
        record = {**result, RUN_KEY: run_record(args, options, rows._fingerprint if rows is not None else None, split)}
        write_json(output, record, default=str)  # the scaffold's writer: a temporary file moved into place
        print(f"results written to {output} (with the versions, options and dataset fingerprint under {RUN_KEY!r})")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Score as perckit evaluate does, then write one self-contained HTML page (pictures inline, no network, opens
    offline) of the samples ordered by the metric's own per-sample score, worst first, with a filter per group. What
    each metric's page shows:"""
    from .draw.report import PAGES, render
    from .export.state import export_layout
    from .hf.benchmark import metric as lookup
    from .io.paths import write_atomic

    bench, spec = lookup(args.metric)  # an OptionError naming the known metrics
    page = PAGES[spec.name]
    if args.max_samples < 1:
        raise OptionError(f"--max-samples {args.max_samples}: expected at least 1")
    options = _kv(args.option) | ({page.option: True} if page.option else {})  # the per-sample rows on
    _models(args.model, args.metric, options)
    output = check_results_path(args.output, kind="report")
    scored = score_files(args, options, keep=True)
    rows, split = scored[4:]
    with_frames = page.frames and rows is not None and page.frames in export_layout(args.references).names()
    frames = load_rows(args.references, page.frames, split, bench.name)[0] if with_frames else None  # else a neutral canvas
    about = f"predictions {args.predictions}, references {args.references}" + (f" ({split} split)" if split else "")
    text, shown = render(args.metric, scored, frames, args.max_samples, about)
    output.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(output, text, f"--output {str(output)!r}")
    print(f"report of {shown} samples, worst first, written to {output} ({len(text.encode()) / 1e6:.1f} MB)")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Print the headline numbers of two or more results files (perckit evaluate --output) side by side, each with
    its delta against the first. Runs of another metric, config or options are refused; a run on a dataset with
    another fingerprint is marked."""
    from .io.jsonio import read_json

    if len(args.runs) < 2:
        raise OptionError(f"compare: expected at least two results files, got {len(args.runs)}")
    results = [read_json(Path(r), error=OptionError, limit=1 << 28) for r in args.runs]
    print(tables.compare(results, args.runs, args.format))
    if args.compare_baselines:  # Syn4D: the card's published baselines, each run as one more row
        from .syn4d.metric.baselines import format_comparison

        for name, result in zip(args.runs, results):
            print(f"\n{name}:\n{format_comparison(result)}")
    return 0


def load_rows(folder: str, config: str | None, split: str | None, benchmark: str):
    """``(rows, split)`` of an export folder (written by ``perckit convert``, or a copy of a pushed one) of
    ``benchmark``, with the split picked by :func:`pick_split`. Only the export's own shards are read, each checked
    before it is decoded (:func:`perckit.export.load_files`; never ``datasets.load_dataset(folder)``, which follows
    the card anywhere), and given back as the builder's rows (:func:`perckit.export.hooks.load_back`: ReasonAVEdit's
    videos joined back)."""
    from .export import hook_module, load_files
    from .export.hooks import load_back
    from .export.state import export_layout

    layout = export_layout(folder)
    name = layout.config_name(config)
    split = pick_split(layout.splits(name), split, f"the dataset {str(folder)!r}" + (f" (config {config!r})" if config else ""))
    return load_back(hook_module(benchmark), load_files(layout, name, split), layout), split


def new_folder(path: str, what: str) -> Path:
    """``path`` as a folder to write into, checked before any work: new or empty (a file, or a folder holding
    anything, is refused: what perckit writes would replace or mix with it)."""
    from .errors import OptionError

    out = Path(path)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise OptionError(f"{what} {path!r}: expected a new or empty folder, got {'a folder with files' if out.is_dir() else 'a file'}; "
                          "what perckit writes would replace or mix with them, so choose a new folder")
    return out


def cmd_gt_predictions(args: argparse.Namespace) -> int:
    """Write predictions that copy the ground truth of each row of --references (a perckit export) in METRIC's own
    format: the prediction format by example, and a run that must score as perfect. mask_temporal, track_id,
    refer_iou and m4seg: a JSON Lines file, one prediction a line; syn4d: the official NPZ folder (the tracks; with
    --dataset-config challenge also depth and poses); av_reasoning: its prediction folder; av_edit_quality: a folder
    of each sample's source clip as its edited clip (<sample_id>.mp4 and .wav), the unedited identity, which scores
    ssim 1 and psnr at its cap."""
    from .hf.benchmark import metric as lookup

    bench, spec = lookup(args.metric)
    folder = spec.folder
    output = new_folder(args.output, "--output") if folder else check_results_path(args.output, kind="predictions")
    (output if folder else output.parent).mkdir(parents=True, exist_ok=True)
    rows, split = load_rows(args.references, args.dataset_config, args.split, bench.name)
    if folder:  # the benchmark's own writer of its prediction files
        count = folder.write_gt(rows, output)
    else:
        with atomic_file(output, "--output", replace=False) as f:  # predictions go to a new path only
            for row in progress(rows, f"writing {output}", unit="row"):
                f.write((json.dumps(spec.gt_prediction(row), ensure_ascii=False) + "\n").encode("utf-8"))
        count = rows.num_rows
    config = f" --config {'|'.join(spec.configs)}" if spec.configs else ""
    dataset = "".join(f" --{flag} {value}" for flag, value in (("dataset-config", args.dataset_config), ("split", args.split)) if value)
    print(f"wrote {count} ground-truth predictions for {args.metric} ({split} split) to {output}; perckit evaluate "
          f"{args.metric}{config} --predictions {output} --references {args.references}{dataset} scores them as perfect")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """List every benchmark perckit builds: its configs (default first), splits and Hub repository, and the metrics
    that score it (with their configs)."""
    from .hf.entrypoints import listing

    rows = listing()
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    for b in rows:
        print(f"{b['benchmark']}: {b['name']}")
        print(f"  configs: {', '.join([b['configs'][0] + ' (default)', *b['configs'][1:]])}")
        print(f"  splits:  {', '.join(b['splits'])}")
        print(f"  Hub:     {b['hub_repo']}")
        for m in b["metrics"]:
            configs = f" (configs {', '.join(m['configs'])})" if m["configs"] else ""
            print(f"  metric:  {m['metric']}{configs}: scores {m['scores']}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Convert every benchmark's sample release, score sample predictions and write a report."""
    from .demo import main as demo_main

    return demo_main(args.output)


def cmd_write_sample(args: argparse.Namespace) -> int:
    """Write a benchmark's synthetic sample release, only into a new or empty folder."""
    from .samples import write_release

    new_folder(args.output, "write-sample output")
    fx = write_release(args.benchmark, args.output, seed=args.seed)
    print(f"wrote {len(fx.files)} files of the {args.benchmark} sample release (synthetic, seed {args.seed}) to {args.output}")
    return 0


def _version_text() -> str:
    from . import __version__

    parts = [f"{name} {_dist_version(name) or 'not installed'}" for name in ("datasets", "evaluate")]
    return f"perckit {__version__} ({', '.join(parts)}; Python {sys.version.split()[0]})"


def _build_options(p: argparse.ArgumentParser, verb: str, benchmarks: list[str], output_help: str, **output: Any) -> None:
    """The options ``convert`` and ``push`` share: what to build, from where, into which export folder."""
    p.add_argument("benchmark", choices=benchmarks, help=f"the benchmark to {verb} (perckit list shows them)")
    p.add_argument("--data-dir", help="release root (default: download from the benchmark's Hub repository)")
    p.add_argument("--config", action="append", help="config to convert (repeatable; default: the builder's default config)")
    p.add_argument("--output", help=output_help, **output)
    p.add_argument("--max-shard-size", default="500MB", help="largest Parquet shard (default 500MB)")
    p.add_argument("--cache-dir", help="datasets cache folder")
    p.add_argument("--no-preview", dest="preview", action="store_false", help="leave out the 'preview' picture column")


def _dataset_options(p: argparse.ArgumentParser, metrics: str, references_help: str) -> None:
    """The options ``evaluate`` and ``gt-predictions`` share: the metric and the dataset folder it reads."""
    p.add_argument("metric", help=metrics)
    p.add_argument("--references", required=True, help=references_help)
    p.add_argument("--dataset-config", help="config of the dataset folder given as --references")
    p.add_argument("--split", help="split of the dataset folder (default: its only split, else test)")


def _score_options(p: argparse.ArgumentParser) -> None:
    """The options ``evaluate`` and ``report`` share: what to score, and how."""
    _dataset_options(p, "mask_temporal, track_id, refer_iou, m4seg, syn4d, av_reasoning or av_edit_quality",
                     "reference rows file, or an export folder (perckit convert, or a copy of a pushed export)")
    p.add_argument("--predictions", required=True, help="prediction rows: .jsonl (one object a line) or a JSON array; or the "
                   "prediction folder of syn4d, av_reasoning, av_edit_quality (perckit gt-predictions writes an example)")
    p.add_argument("--config", help="metric config (syn4d: tracking, depth or pose)")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="metric option, e.g. iou_threshold=0.7 (repeatable; "
                   "av_edit_quality: metrics='[\"ssim\",\"psnr\",\"bg_psnr\",\"bg_ssim\"]' for the model-free keys alone)")
    p.add_argument("--model", action="append", metavar="NAME=PATH", help="av_edit_quality: local weights of a model metric, "
                   "e.g. fvd=weights/i3d_pretrained_400.pt (repeatable; the metric's models option, names in its card)")


def _command(sub: Any, name: str, fn: Callable[[argparse.Namespace], int], help: str,
             more: str = "") -> argparse.ArgumentParser:
    """The subcommand ``name``, run by ``fn`` and described by its docstring (then ``more``)."""
    p = sub.add_parser(name, help=help, description=" ".join(filter(None, ((fn.__doc__ or "").strip(), more))) or None)
    p.set_defaults(fn=fn)
    return p


def build_parser() -> argparse.ArgumentParser:
    from .draw.report import MAX_SIDE, PAGES
    from .hf.benchmark import NAMES

    benchmarks = sorted(NAMES)
    p = argparse.ArgumentParser(
        prog="perckit",
        description="Typed Hugging Face datasets and evaluate metrics for perception benchmarks. "
        "Convert a benchmark release to Hub-ready Parquet, push it, score predictions, or run the demo.",
    )
    p.add_argument("--version", action="version", version=_version_text(), help="print the perckit, datasets and evaluate versions and exit")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress bars (perckit's, datasets', huggingface_hub's, transformers'); the results and the last "
                   "line, which names what the command wrote and where, are printed all the same; an option of perckit, before the command")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    c = _command(sub, "convert", cmd_convert, "build a benchmark config and write Hub-layout Parquet + dataset card")
    _build_options(c, "build", benchmarks, "export folder", required=True)

    pu = _command(sub, "push", cmd_push, "convert, then upload to a Hub dataset repository (only what changed)")
    _build_options(pu, "convert and push", benchmarks, "export folder (default build/export/<benchmark>)")
    pu.add_argument("--repo-id", required=True, help="ORG/NAME of the dataset repository (created if absent)")
    pu.add_argument("--skip-convert", action="store_true", help="push an existing export as it is")
    pu.add_argument("--token", help="Hub token (default: the one huggingface_hub finds)")
    pu.add_argument("--revision", help="branch to push to")
    pu.add_argument("--public", action="store_true", help="create the repository public (default: private); refused "
                    "for a licence that does not grant redistribution unless --i-may-redistribute is given too")
    pu.add_argument("--i-may-redistribute", action="store_true", help="with --public: you may publish this benchmark's data")
    pu.add_argument("--large", action=argparse.BooleanOptionalAction, default=None,
                    help="on a huggingface_hub older than 1.20, use upload_large_folder (default: when the data files "
                    "pass 1 GB or 100 files); newer releases' upload_folder is already resumable")

    e = _command(sub, "evaluate", cmd_evaluate, "score predictions from files")
    _score_options(e)
    e.add_argument("--output", help="write the full results JSON here, with the perckit / datasets / evaluate versions, the "
                   "options, the dataset fingerprint and the time under 'perckit_run' (checked before scoring; an existing "
                   "file is replaced only if it is an earlier perckit results file)")
    e.add_argument("--compare-baselines", action="store_true", help="syn4d only: print the Syn4D card's published "
                   "baseline table with this run's overall numbers as one more row")
    e.add_argument("--format", choices=FORMATS, default="text", help="the printed results: a table (text, markdown, "
                   "latex) of the headline numbers and of each per-group block, or the whole result as json")

    r = _command(sub, "report", cmd_report, "write one HTML page of your own samples, worst first, to look at your errors",
                 more="; ".join(f"{name}: {p.shows} (ordered by {' / '.join(p.score)})" for name, p in PAGES.items()) + ".")
    _score_options(r)
    r.add_argument("--output", required=True, help="the page to write (.html; checked before scoring; an existing file is "
                   "replaced only if it is an earlier perckit report)")
    r.add_argument("--max-samples", type=int, default=200, help="the worst samples shown, at most (default 200; pictures are "
                   f"JPEG of at most {MAX_SIDE} px, so a page stays a few MB)")

    cp = _command(sub, "compare", cmd_compare, "print results files of perckit evaluate side by side, with deltas against the first")
    cp.add_argument("runs", nargs="+", metavar="RUN.json", help="results files, the first is the reference")
    cp.add_argument("--format", choices=FORMATS, default="text", help="text, markdown, latex or json")
    cp.add_argument("--compare-baselines", action="store_true", help="syn4d only: each run beside the Syn4D card's baselines")

    g = _command(sub, "gt-predictions", cmd_gt_predictions, "write the ground truth of a dataset folder as a metric's predictions")
    _dataset_options(g, "mask_temporal, track_id, refer_iou, m4seg, syn4d, av_reasoning or av_edit_quality",
                     "an export folder (perckit convert, or a copy of a pushed export)")
    g.add_argument("--output", required=True, help="the predictions file to write (.jsonl; must not exist) or, for syn4d, "
                   "av_reasoning and av_edit_quality, the folder (new or empty)")

    li = _command(sub, "list", cmd_list, "the benchmarks with their configs, splits, Hub repositories and metrics")
    li.add_argument("--json", action="store_true", help="print the listing as JSON")

    d = _command(sub, "demo", cmd_demo, "convert every benchmark's sample release, score sample predictions, write a report")
    d.add_argument("--output", default="build/demo", help="report folder (default build/demo; must be new, empty or an earlier demo output)")

    w = _command(sub, "write-sample", cmd_write_sample, "write a benchmark's synthetic sample release")
    w.add_argument("benchmark", choices=benchmarks, help="the benchmark whose sample release to write")
    w.add_argument("output", help="the folder to write the sample release into")
    w.add_argument("--seed", type=int, default=0, help="seed of the synthetic content (default 0; same seed, same files)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Exit codes and error lines: :mod:`perckit.hf.cli` (0 done, 2 the command line is wrong, 1 the data is)."""
    args = build_parser().parse_args(argv)
    token = DATA_DIR_HINT.set("--data-dir /path/to/release")  # offline errors name the CLI flag
    try:
        with progress_bars(not args.quiet):
            return run_guarded(args.fn, args, exit_code)
    finally:
        DATA_DIR_HINT.reset(token)


if __name__ == "__main__":
    sys.exit(main())
