"""The doors other programs use: the MCP server, the OpenAI-compatible server, the HTTP plumbing and who may use it,
the memory tools they share."""
