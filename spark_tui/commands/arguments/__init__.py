"""Each subcommand's arguments, in modules by kind of command: building the parser of one
command (what `spark-tui <command>` does) compiles only its module."""
