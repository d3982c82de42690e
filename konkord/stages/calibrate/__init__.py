"""The calibrate stage: the judge against people's labels,
agreement figures, the method sentences, and the terminal printout.
"""
