"""CLI subcommands. Each module has `register(subparsers)`, which adds a parser whose
`func(args, ctx) -> int` runs the command (ctx is an `app.context.AppContext`)."""

COMMAND_MODULES = [
    "app.commands.doctor",
    "app.commands.chat",
    "app.commands.search",
    "app.commands.memory",
    "app.commands.chats",
    "app.commands.ingest",
    "app.commands.eval",
    "app.commands.bench",
    "app.commands.models",
    "app.commands.mcp",
    "app.commands.serve",
]
