"""The Query Engine: conversations, chat turns, tools, citations, traces and ratings."""
