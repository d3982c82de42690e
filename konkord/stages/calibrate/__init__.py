"""The calibrate stage: each judge against people's labels.

Owns: the calibration blocks (calibrate), the stage's entry that rewrites them in a results
file (calibrate_run), agreement between judge and people and between people
(calibrate_agreement), a cascade's two judges as rows of their own (route_rows), the method
sentences and captions (methods), the terminal printout (calibrate_print).

May import: stages.decisions_of, stages.judge and every stage below them, and every layer
below stages.
"""
