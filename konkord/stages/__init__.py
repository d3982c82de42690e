"""The stages, one package or module per stage; each reads and appends evidence.

Owns: run (answers), judge/ (single judge, cascade), label/ (people, and simulated labellers),
check (code checks), current (what a run holds now, shared by report and calibrate),
decisions and decisions_of (one view of who decided what, and its reader),
calibrate/, report/, simulate/, dry_run (what run and judge would call), pipeline (a run
brought up to date, like make), build/ (the site built, served, published).

May import: everything below it (providers, site, sim, checks, results, configuration, evidence,
stats, errors). Inside, a stage imports only the stages below it (pyproject.toml's "Stages"
contract: build > pipeline > dry_run | report | simulate > calibrate > decisions_of >
judge : decisions > label | check > current > run). Never commands or importers.
"""
