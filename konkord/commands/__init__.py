"""One module per command, registered by name in konkord.cli.COMMANDS.

Each imports only click at module level and its stage inside the command function (litellm
costs seconds to import; `--help` must stay fast). May import everything below it.
"""

# True in the console script's process (`konkord.cli.main`), which ends when its one command
# does: a command may then leave the cyclic garbage collector off to the end, where turning it
# on again would only walk what the command made just before it is all let go.
PROCESS_ENDS_WITH_COMMAND = False
