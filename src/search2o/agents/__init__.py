"""The Agent Engine: definitions, expressions, commands, runner, validation.

The public names are re-exported here: :func:`parse_definition` and its results
(:class:`AgentDefinition`, :class:`DefinitionError` with its :class:`DefinitionProblem` list),
and the :class:`AgentRegistry` of stored definitions (docs/agents.md).
"""

from search2o.agents.definition import (
    AgentDefinition,
    Command,
    DefinitionError,
    DefinitionProblem,
    InputSpec,
    PromptSpec,
    check_inputs,
    parse_definition,
)
from search2o.agents.registry import AgentRegistry, AgentSummary

__all__ = [
    "AgentDefinition",
    "AgentRegistry",
    "AgentSummary",
    "Command",
    "DefinitionError",
    "DefinitionProblem",
    "InputSpec",
    "PromptSpec",
    "check_inputs",
    "parse_definition",
]
