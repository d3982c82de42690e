"""The calibrate stage: each judge against people's labels.

Owns: the calibration blocks (calibrate), agreement between judge and people and between people
(calibrate_agreement), the method sentences and captions (methods), the terminal printout
(calibrate_print).

May import: stages.judge and every stage below it, and every layer below stages.
"""
