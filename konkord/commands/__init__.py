"""One module per command, registered by name in konkord.cli.COMMANDS.

Each imports only click at module level and its stage inside the command function (litellm
costs seconds to import; `--help` must stay fast). May import everything below it.
"""
