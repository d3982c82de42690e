"""The report stage: the results file computed from the evidence,
its rankings, anchored estimates, judge panel, freshness digest and terminal printout.
"""
