"""Stages: run, judge, label, calibrate, report, check, build. Each reads and appends evidence."""
