"""The build stage: every run brought up to date and the site rendered; serve and publish.

Owns: the build (build), runs.json checked against results/ both ways (listing), the live
preview server that rebuilds on change (serve), and a run added to the published list (publish).

May import: stages.pipeline and every stage below it, and every layer below stages.
"""
