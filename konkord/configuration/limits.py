"""The ranges a number from a person must fall in, shared by runs.json and the command line."""

# The most output tokens one call may ask for: far above any model's window, far below what
# overflows a float when the budget multiplies it by a price.
MAX_TOKENS_LIMIT = 10_000_000
SEED_LIMIT = 2**63 - 1  # providers take a 64-bit seed
TEMPERATURE_LIMIT = 2.0  # the widest range a provider takes (OpenAI's)
