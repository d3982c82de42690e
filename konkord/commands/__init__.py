"""One module per command; each imports its stage lazily inside the command function."""
