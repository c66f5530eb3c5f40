"""The model-based edit-quality metrics (see :mod:`.base` for the protocol).

:data:`ENTRIES` is the one list of them, in output order. Each entry names its factory in its own module
(imported only when that metric runs), the definition it follows, and what to install / pass to enable it.
Importing this package imports no model library.
"""

from __future__ import annotations

from .base import QUALITY_EXTRA as _EXTRA
from .base import Clip, ModelEntry, ModelMetric, ModelOptions, ModelUnavailable, QualitySample, count_records

ENTRIES: tuple[ModelEntry, ...] = (
    ModelEntry(
        name="fvd", keys=("fvd",), factory=".i3d:build_fvd",
        source="FVD (Unterthiner et al., 2019): Fréchet distance (covariance ddof=1) of the 400-d I3D Kinetics-400 "
               "logits-layer features of 16-frame clips (the first 16 frames; options.extra fvd_sampling='windows' or "
               "'uniform', fvd_num_frames), the I3D (TF-Hub deepmind/i3d-kinetics-400/1) as the PyTorch InceptionI3d "
               "(piergiaj/pytorch-i3d; VideoGPT's i3d_pretrained_400.pt state dict, read with weights_only=True and loaded "
               "strictly into perckit's own module of that layout; frames resized to 224 on the shorter side and "
               "centre-cropped, scaled to [-1, 1], as VideoGPT / JunyaoHu's 'videogpt' FVD); StyleGAN-V's TorchScript "
               "i3d_torchscript.pt is refused (a program, never loaded); a video shorter than 16 frames is left out; "
               "reference set: the source videos of the same samples; None below 2 clips",
        install=_EXTRA,
        weights="models={'fvd': '<path to VideoGPT's i3d_pretrained_400.pt (linked from JunyaoHu's "
                "common_metrics_on_video_quality README), or a folder holding it>'}",
    ),
    ModelEntry(
        name="fad", keys=("fad",), factory=".vggish:build_fad",
        source="FAD (Kilgour et al., 2019): Fréchet distance (covariance ddof=1) of the 128-d VGGish embeddings "
               "(torchvggish's port of the AudioSet VGGish: the last layer before its ReLU, no PCA, as Google's and "
               "gudgud96's FAD) of every 0.96 s frame of the 16 kHz mono audio, pooled over the set; a clip shorter "
               "than one frame is padded with silence, a sample without audio on either side left out; reference "
               "set: the source audio of the same samples; None below 2 frames",
        install=_EXTRA,
        weights="models={'fad': '<path to the torchvggish vggish-10086976.pth, or a folder holding it>'} (default: "
                "<torch hub dir>/checkpoints/vggish-10086976.pth, never downloaded)",
    ),
    ModelEntry(
        name="clip", keys=("tv_a", "tc"), factory=".clip:build_clip",
        source="TV-A: CLIPScore (Hessel et al., 2021) at torchmetrics' scale, 100 * max(cos, 0), of the target text "
               "against each edited frame, mean over frames; TC: mean cosine similarity of consecutive edited frames' "
               "CLIP image features; CLIP (openai/clip-vit-large-patch14) through transformers",
        install=_EXTRA, weights="models={'clip': '<local CLIP folder or cached repo id, e.g. openai/clip-vit-large-patch14>'}",
    ),
    ModelEntry(
        name="ta_a", keys=("ta_a",), factory=".clap:build_clap",
        source="TA-A: CLAP score (Wu et al., 2023), the cosine of the target text and the edited audio (48 kHz) "
               "embeddings as MMAudio's av-benchmark LAION-CLAP score; CLAP through transformers (laion/clap-htsat-unfused)",
        install=_EXTRA, weights="models={'ta_a': '<local CLAP folder or cached repo id>'}",
    ),
    ModelEntry(
        name="av_a", keys=("av_a",), factory=".imagebind:build_imagebind",
        source="AV-A: cosine similarity of ImageBind (Girdhar et al., 2023) audio and vision embeddings of the "
               "edited clip (MMAudio av-benchmark's IB-score; ImageBind's own 5 x 2 s video / 3 x 2 s audio clips)",
        install="pip install git+https://github.com/facebookresearch/ImageBind (not on PyPI; brings torchaudio, "
                "torchvision, pytorchvideo)",
        weights="models={'av_a': '<path to imagebind_huge.pth>'} (default: ./.checkpoints/imagebind_huge.pth if present)",
    ),
    ModelEntry(
        name="lpaps", keys=("lpaps",), factory=".lpaps:build_lpaps",
        source="LPAPS (Iashin & Rahtu, SpecVQGAN, 2021): LPIPS-style distance of SpecVQGAN's VGGish-ish features of "
               "the 22050 Hz, 80-band mel spectrograms (SpecVQGAN's definition), edited against source audio cut to the "
               "shorter (not padded to 10 s), mean over samples; needs the trained lpaps.pt (at SpecVQGAN's HEAD no "
               "checkpoint loads and its LPAPS is a random network, issue #13)",
        install=_EXTRA, weights="models={'lpaps': '<path to SpecVQGAN lpaps.pt (commit 3894458), or a folder holding it>'}",
    ),
    ModelEntry(
        name="sync", keys=("sync_c", "sync_d"), factory=".syncnet:build_syncnet",
        source="Sync-C / Sync-D (LSE-C / LSE-D, Prajwal et al., Wav2Lip 2020): SyncNet (Chung & Zisserman, 2016; "
               "joonson/syncnet_python) confidence (median - min) and minimum of the mean audio-visual distance over "
               "+-15 frame offsets of the edited clip at 25 fps / 16 kHz MFCC, mean over samples; DEVIATION: no S3FD "
               "face detection / tracking, the whole frame is resized to 224 x 224 (as Wav2Lip's LRS scoring of "
               "face-cropped videos; options.extra sync_crop='center_square' or a fraction box), so values are not "
               "comparable with lip-sync papers",
        install=_EXTRA, weights="models={'sync': '<path to syncnet_v2.model (syncnet_python download_model.sh)>'}",
    ),
    ModelEntry(
        name="pq", keys=("pq",), factory=".audiobox:build_pq",
        source="PQ: production quality axis of Meta's Audiobox Aesthetics (Tjandra et al., 2025), "
               "audiobox_aesthetics package",
        install="pip install --no-deps audiobox_aesthetics (its torchaudio pin would replace the CPU torch)",
        weights="models={'pq': '<facebook/audiobox-aesthetics folder, repo id or checkpoint.pt>'} (default: the HF cache)",
    ),
    ModelEntry(
        name="desync", keys=("desync",), factory=".synchformer:build_desync",
        source="DeSync as MMAudio's av-benchmark: Synchformer (Iashin et al., 2024) offset classes on a "
               "linspace(-2, 2, 21) s grid for the first and last 4.8 s windows of the edited clip (25 fps, 16 kHz), "
               "mean |offset| in seconds; clips shorter than 4.8 s are padded (still frames, silence; a deviation: "
               "av-benchmark drops them) unless ModelOptions.extra['desync_short_clip'] = 'skip'",
        install="pip install git+https://github.com/hkchengrex/av-benchmark (not on PyPI; needs einops, timm, omegaconf)",
        weights="models={'desync': '<synchformer_state_dict.pth or its folder>'}, or hkchengrex/MMAudio "
                "(ext_weights/synchformer_state_dict.pth) in the Hugging Face cache",
    ),
    ModelEntry(
        name="peavs", keys=("peavs",), factory=".peavs:build_peavs",
        source="PEAVS (Goncalves et al., 2024): learned 1-5 audio-visual synchrony score, read from the official "
               "implementation's results.csv (amazon-science/avgen-eval-toolkit, a script pipeline, not a package; "
               "perckit runs no PEAVS network)",
        install="run the official run_PEAVS.sh (amazon-science/avgen-eval-toolkit) on the edited videos named <sample_id>.mp4",
        weights="models={'peavs': '<path to PEAVS/results/results.csv>'}",
    ),
)

#: The settings a model factory reads from ``ModelOptions.extra`` (``av_edit_quality``'s ``model_options``):
#: name -> (the entry that reads it, what it is). Each factory checks its values.
MODEL_OPTIONS: dict[str, tuple[str, str]] = {
    "clip_frame_stride": ("clip", "score every k-th edited frame for TV-A / TC (default 1: all)"),
    "fvd_num_frames": ("fvd", "frames per I3D clip (default 16, FVD16)"),
    "fvd_sampling": ("fvd", "'first' 16 frames (default), 'windows' (every non-overlapping run) or 'uniform'"),
    "fad_activation": ("fad", "VGGish embeddings after the final ReLU (default False: before it, as gudgud96's FAD)"),
    "sync_vshift": ("sync", "SyncNet offsets searched, +-frames (default 15)"),
    "sync_crop": ("sync", "'full' frame (default), 'center_square', or a (top, left, bottom, right) fraction box"),
    "desync_short_clip": ("desync", "a clip under 4.8 s: 'pad' (default) or 'skip' (as av-benchmark)"),
}

#: output key -> its entry
BY_KEY: dict[str, ModelEntry] = {k: e for e in ENTRIES for k in e.keys}
#: every model-based output key, in output order
MODEL_KEYS: tuple[str, ...] = tuple(k for e in ENTRIES for k in e.keys)

__all__ = ["BY_KEY", "MODEL_OPTIONS", "Clip", "count_records", "ENTRIES", "MODEL_KEYS", "ModelEntry", "ModelMetric", "ModelOptions", "ModelUnavailable", "QualitySample"]
