"""The lmms-eval task folder of m4seg: the task YAML and its utils.py (lmms-eval imports utils.py by path)."""
