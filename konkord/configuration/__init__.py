"""What a run is, read from files and checked before anything runs.

Owns: suites (suite), JSON/YAML with positions for one-line errors (yamlpos), runs.json
(runs_config), the resolved run (runspec: suite, models, judges, settings, prices, label plan,
results path), the settings of a model call (call_settings), where models are served
(deployments), where credentials come from and how they are kept out of files (credentials), and
the judge frame (judge_frame: the prompt around the rubric and the parser of the verdict line),
and the short names runs.json gives models and judges, applied when shown (display_names).

May import: konkord.evidence (atomic writes, paths inside the project) and konkord.errors.
Never providers, stages or anything above.
"""
