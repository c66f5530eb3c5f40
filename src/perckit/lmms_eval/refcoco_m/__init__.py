"""The lmms-eval task folder of refcoco_m: the task YAML and its utils.py (lmms-eval imports utils.py by path)."""
