"""The static site: results files rendered to public/ (render, contexts, pages, svg, markdown),
rewritten only where inputs changed (incremental), built in a copy swapped in whole (staging). Previewing it live is konkord.stages.build.serve.

May import: konkord.results, konkord.configuration, konkord.evidence, konkord.errors. Never
providers, sim or stages (pyproject.toml's "The site renders the results file" contract).
"""
