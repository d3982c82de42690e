"""The judge stage: single judge, the cascade (cheap judge first),
and how a cascade's verdicts are viewed and reported.
"""
