"""The Hugging Face Space of the m4seg metric: evaluate's Gradio widget over the metric script beside this file.

In a Space the repository folder is not named after the metric, so the script is loaded by its own path, not by
folder name. The widget shows one table row per example, its `predictions` and `references` cells as JSON
(see README.md beside this file for the fields); the Space SDK provides gradio, requirements.txt installs perckit.
"""

from pathlib import Path

import evaluate

module = evaluate.load(str(Path(__file__).with_name("m4seg.py")))
evaluate.utils.launch_gradio_widget(module)
