"""Every metric card that declares a Hugging Face Space ships what the Space runs (issue 18).

A card declares a Space with ``sdk: gradio`` and ``app_file: app.py`` in its YAML front matter; then
``metrics/<name>/`` holds ``app.py`` (evaluate's ``launch_gradio_widget`` over the metric script beside it, loaded
by path) and a ``requirements.txt`` pinning ``evaluate`` and perckit, and the wheel ships both. A card without a
Space declares none of the Space keys, ships no ``app.py``, and says how to use the module instead. The apps run
here with the widget replaced (or with a stand-in ``gradio`` under evaluate's real widget): nothing is launched and
no network is used.
"""

from __future__ import annotations

import ast
import json
import re
import runpy
import sys
import tomllib
import types

import pytest
import yaml
from helpers.common import REPO

from perckit.hf import benchmark as benchmarks

METRICS = sorted({m.name for name in benchmarks.NAMES for m in benchmarks.get(name).metrics})
#: The YAML keys of a Hugging Face Space: a card declares all three or none.
SPACE_KEYS = ("sdk", "sdk_version", "app_file")
#: The metrics whose card declares a Space (the others' inputs cannot be typed into the widget's JSON cells).
SPACES = ("m4seg", "mask_temporal", "refer_iou", "track_id")
PERCKIT_VERSION = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
#: A requirement line: a name, optional extras, an exact pin.
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)(?:\[(?P<extras>[A-Za-z0-9_,.-]+)\])?==(?P<version>\S+)$")

#: One example per Space, as a person would type it into the widget's table (the cards' worked examples).
WIDGET_EXAMPLES = {
    "track_id": (
        {"query_id": "q1", "target_track_ids": ["3"]},
        {"query_id": "q1", "scene": "s", "target_track_ids": ["3", "5"]},
        "f1", 2 / 3,
    ),
    "refer_iou": (
        {"expression_id": "10:0", "mask": {"size": [2, 3], "counts": "021O1"}},
        {"expression_id": "10:0", "mask": {"size": [2, 3], "counts": "033"}, "category": "dog", "supercategory": "animal"},
        "miou", 0.5,
    ),
    "mask_temporal": (
        {"query_id": "q", "frames": [{"frame_id": 1, "mask": {"size": [1, 4], "counts": "013"}}]},
        {"query_id": "q", "scene": "s", "query_type": "A", "is_negative": False,
         "frames": [{"frame_id": 1, "mask": {"size": [1, 4], "counts": "022"}}],
         "evaluated_frame_ids": [1], "scene_frame_ids": [1]},
        "miou", 0.5,
    ),
    "m4seg": (
        {"example_id": "e", "a": "chair", "groundings": [{"image_index": 1, "name": "chair", "segmentation": {"size": [1, 4], "counts": "022"}}]},
        {"example_id": "e", "a": "chair_101", "type": "spatial", "dataset_name": "coco_objects", "granularity": "object",
         "images": [{"height": 1, "width": 4}, {"height": 1, "width": 2}],
         "groundings": [{"image_index": 1, "name": "chair", "answer_span": [0, 9], "segmentation": {"size": [1, 4], "counts": "022"}}]},
        "miou", 1.0,
    ),
}


def _front_matter(metric: str) -> dict:
    card = (REPO / "metrics" / metric / "README.md").read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n", card, re.S)
    assert match, f"metrics/{metric}/README.md has no YAML front matter"
    return yaml.safe_load(match.group(1))


def _declares_space(metric: str) -> bool:
    meta = _front_matter(metric)
    present = [k for k in SPACE_KEYS if k in meta]
    assert present in ([], list(SPACE_KEYS)), f"metrics/{metric}/README.md declares only {present} of {list(SPACE_KEYS)}"
    if present:
        assert (meta["sdk"], meta["app_file"]) == ("gradio", "app.py"), meta
    return bool(present)


def _requirements(metric: str) -> dict[str, re.Match]:
    lines = (REPO / "metrics" / metric / "requirements.txt").read_text(encoding="utf-8").splitlines()
    pins = {}
    for line in (ln.strip() for ln in lines):
        if not line or line.startswith("#"):
            continue
        match = _PIN.match(line)
        assert match, f"metrics/{metric}/requirements.txt: {line!r} is not an exact pin"
        pins[match["name"].lower()] = match
    return pins


def _run_app(metric: str, monkeypatch) -> list:
    """Run metrics/<metric>/app.py as a Space would, with the widget replaced; the modules it was given."""
    import evaluate.utils

    calls = []
    monkeypatch.setattr(evaluate.utils, "launch_gradio_widget", lambda module, **kw: calls.append((module, kw)))
    runpy.run_path(str(REPO / "metrics" / metric / "app.py"), run_name="__main__")
    return calls


def test_the_spaces_are_the_expected_ones():
    assert [m for m in METRICS if _declares_space(m)] == list(SPACES)


@pytest.mark.parametrize("metric", METRICS)
def test_space_declared_iff_its_files_exist(metric):
    folder = REPO / "metrics" / metric
    declared = _declares_space(metric)
    assert (folder / "app.py").is_file() == declared, f"metrics/{metric}: Space declared {declared}, app.py present {not declared}"
    assert (folder / "requirements.txt").is_file() == declared, f"metrics/{metric}: Space declared {declared}, requirements.txt present {not declared}"
    body = (folder / "README.md").read_text(encoding="utf-8")
    heading = "## The Space" if declared else "## No Hugging Face Space"
    assert heading in body, f"metrics/{metric}/README.md: no {heading!r} section"
    if not declared:
        assert f'perckit.metric_path("{metric}")' in body, f"metrics/{metric}/README.md does not say how to load it without a Space"


@pytest.mark.parametrize("metric", SPACES)
def test_requirements_pin_evaluate_and_this_perckit(metric):
    pins = _requirements(metric)
    assert pins["evaluate"]["version"] == "0.4.6"
    assert pins["perckit"]["version"] == PERCKIT_VERSION
    assert "gradio" not in pins, "gradio comes with the Space SDK (sdk_version in the card), never from requirements.txt"
    assert set(pins) == {"evaluate", "perckit"}, sorted(pins)
    extras = set((pins["perckit"]["extras"] or "").split(",")) - {""}
    assert extras == ({"text", "meteor"} if metric == "m4seg" else set()), extras
    packages = REPO / "metrics" / metric / "packages.txt"
    if "meteor" in extras:
        assert "default-jre-headless" in packages.read_text(encoding="utf-8").split(), "METEOR runs on Java: packages.txt must install it"
    else:
        assert not packages.exists()


@pytest.mark.parametrize("metric", SPACES)
def test_app_loads_the_script_beside_it(metric, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # a Space's working folder is not named after the metric
    calls = _run_app(metric, monkeypatch)
    assert len(calls) == 1, calls
    module, kwargs = calls[0]
    assert kwargs == {}
    import evaluate

    expected = evaluate.load(str(REPO / "metrics" / metric))
    assert isinstance(module, evaluate.EvaluationModule)
    assert type(module).__name__ == type(expected).__name__
    assert module.name == expected.name
    assert module.config_name == "default"
    assert module.features == expected.features


#: The m4seg widget runs the sentence encoder and METEOR's Java pipeline (about a minute): slow.
@pytest.mark.parametrize("metric", [pytest.param(m, marks=pytest.mark.slow) if m == "m4seg" else m for m in SPACES])
def test_widget_scores_one_typed_example(metric, monkeypatch):
    """evaluate's real ``launch_gradio_widget`` with a stand-in gradio: the table it builds has one JSON column per
    input, and its compute scores a row of JSON cells as gradio's Dataframe hands them over."""
    pd = pytest.importorskip("pandas")
    if metric == "m4seg":
        pytest.importorskip("sentence_transformers", reason="the m4seg Space's default encoder needs perckit's text extra")
        from perckit.m4seg.metric import text

        if not text.java_available():
            pytest.skip("the m4seg Space's METEOR needs Java (the Space's packages.txt installs it)")
    built = {}

    class Interface:
        def __init__(self, fn, inputs, outputs, **kwargs):
            built.update(fn=fn, inputs=inputs, kwargs=kwargs)

        def launch(self, *args, **kwargs):
            built["launched"] = True

    def component(*args, **kwargs):
        return kwargs

    gradio = types.ModuleType("gradio")
    gradio.Interface = Interface
    gradio.inputs = types.SimpleNamespace(Dataframe=component)
    gradio.outputs = types.SimpleNamespace(Textbox=component)
    monkeypatch.setitem(sys.modules, "gradio", gradio)
    import evaluate.utils

    module = evaluate.load(str(REPO / "metrics" / metric))
    evaluate.utils.launch_gradio_widget(module)
    assert built.get("launched") is True
    assert list(built["inputs"]["headers"]) == ["predictions", "references"]
    assert list(built["inputs"]["datatype"]) == ["str", "str"]  # JSON text, parsed by the widget
    prediction, reference, key, value = WIDGET_EXAMPLES[metric]
    table = pd.DataFrame({"predictions": [json.dumps(prediction)], "references": [json.dumps(reference)]})
    result = built["fn"](table)
    assert result[key] == pytest.approx(value)


def _scripts_patterns() -> list[str]:
    """SCRIPTS of setup.py: the package_data patterns of each package perckit.metrics.<name> (its *.py files are
    its modules)."""
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["SCRIPTS"]:
            return ast.literal_eval(node.value)
    pytest.fail("setup.py defines no SCRIPTS")


def test_wheel_ships_every_space_file():
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))
    source = ast.unparse(tree)
    assert "dict.fromkeys(SCRIPT_PACKAGES, SCRIPTS)" in source, "setup.py: the package_data of the script folders is not SCRIPTS"
    root = REPO / "metrics"
    shipped = {p for pattern in ["*.py", *_scripts_patterns()] for p in root.glob(f"*/{pattern}")}
    for metric in SPACES:
        folder = root / metric
        for name in ("app.py", "requirements.txt", "README.md", f"{metric}.py", *(["packages.txt"] if (folder / "packages.txt").exists() else [])):
            assert folder / name in shipped, f"the wheel would not ship metrics/{metric}/{name} (setup.py SCRIPTS)"
