"""The build stage: bring runs up to date and render the site,
serve it with live reload, publish a run.
"""
