"""Package layout (everything else is in pyproject.toml).

The builder and metric scripts stay at the top of the checkout (``builders/<name>/``, ``metrics/<name>/``,
where ``load_dataset("builders/r4d_bench")`` and ``evaluate.load("metrics/mask_temporal")`` find them) and ship
inside the wheel as the data packages ``perckit.builders`` and ``perckit.metrics``, so an installed perckit
finds them with no checkout (``perckit.builder_path`` / ``perckit.metric_path``).
"""

from setuptools import find_packages, setup

#: What ships beside each script: the script itself and a metric Space's app.py (*.py), its card, and a metric
#: Space's pip and system requirements (metrics/<name>/requirements.txt, packages.txt).
SCRIPTS = ["*/*.py", "*/README.md", "*/requirements.txt", "*/packages.txt"]

setup(
    packages=find_packages("src") + ["perckit.builders", "perckit.metrics"],
    package_dir={"": "src", "perckit.builders": "builders", "perckit.metrics": "metrics"},
    package_data={"perckit.builders": SCRIPTS, "perckit.metrics": SCRIPTS,
                  "perckit": ["syn4d/metric/*.json", "lmms_eval/*/*.yaml"]},
)
