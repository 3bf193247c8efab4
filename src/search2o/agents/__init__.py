"""The Agent Engine: definitions, expressions, commands, runner, validation."""
