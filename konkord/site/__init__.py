"""The static site: results files rendered to public/ (render, svg, markdown), rewritten only
where inputs changed (incremental), and previewed live (serve)."""
