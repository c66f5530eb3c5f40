"""Package layout (everything else is in pyproject.toml).

The builder and metric scripts stay at the top of the checkout (``builders/<name>/``, ``metrics/<name>/``,
where ``load_dataset("builders/r4d_bench")`` and ``evaluate.load("metrics/mask_temporal")`` find them). The
links ``src/perckit/builders`` and ``src/perckit/metrics`` point at those folders, so every package is under
``src/``: the wheel ships the scripts as the data packages ``perckit.builders.<name>`` / ``perckit.metrics.<name>``
(an installed perckit finds them with no checkout: ``perckit.builder_path`` / ``perckit.metric_path``), and an
editable install is ``src/`` on ``sys.path`` (a .pth line), which a folder named ``perckit`` in the working
directory cannot shadow, and which sees new files at once.
"""

from setuptools import find_namespace_packages, find_packages, setup

#: What ships beside each script (the *.py files: the script and a metric Space's app.py): its card and a metric
#: Space's pip and system requirements (metrics/<name>/requirements.txt, packages.txt).
SCRIPTS = ["README.md", "requirements.txt", "packages.txt"]
#: perckit.builders, perckit.metrics and one package per script folder (no __init__.py: namespace packages).
SCRIPT_PACKAGES = find_namespace_packages("src", include=["perckit.builders*", "perckit.metrics*"], exclude=["*.__pycache__"])

setup(
    packages=find_packages("src") + SCRIPT_PACKAGES,
    package_dir={"": "src"},
    package_data={**dict.fromkeys(SCRIPT_PACKAGES, SCRIPTS), "perckit": ["syn4d/metric/*.json", "lmms_eval/*/*.yaml"]},
)
