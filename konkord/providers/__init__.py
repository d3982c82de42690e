"""The one door to the models: litellm, deployments, budget, batches,
model names, provider families, credentials, confidence from log-probabilities.
"""
