"""The Anthropic Messages dialect (`POST /v1/messages`): sans-I/O."""
