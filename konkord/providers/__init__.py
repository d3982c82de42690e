"""The one door to the models.

Owns: litellm loaded once and its errors read (loading), the client every stage calls (llm:
concurrency, retries, cost, the response cache), which client a stage gets (door), the result of
a call and the cache file (calls), deployments behind litellm's Router (deployments), estimates
and the --max-cost cap (budget), batch mode (batch, batch_api, batch_format, batch_resume,
batch_spool), model names checked against litellm's map (model_names), provider families
(families), a judge's confidence from log-probabilities or samples (confidence), and failed
calls told in a few lines (failures).

May import: konkord.sim (the offline provider it registers), konkord.results,
konkord.configuration, konkord.evidence, konkord.errors. Never stages or the site.
"""
