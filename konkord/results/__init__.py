"""The results file (results/<run>.json): its schema, the stamps that
let report and build answer at once, and the light views the site and terminal share.
"""
