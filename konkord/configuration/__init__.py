"""What a run is: the suite, YAML/JSON positions for error lines,
runs.json, the resolved run spec, and the judge frame (prompt and verdict parser).
"""
