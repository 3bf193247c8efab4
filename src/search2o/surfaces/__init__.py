"""What every surface shares: who a message acts as, and which conversation a thread continues.

* :mod:`search2o.wire.names`: the rules for surface, workspace, channel, thread and
  external user names (one validator for all of them).
* :mod:`search2o.surfaces.identity`: surface identities (an external account linked to a user,
  by a platform-verified email or a one-time link code), link codes, the shared-channel
  principal, and the ``X-Search2o-Act-As`` rule of surface service tokens.
* :mod:`search2o.surfaces.threads`: the mapping of (surface, workspace, channel, thread) to a
  conversation.
* :mod:`search2o.surfaces.deliveries`: the delivery records of the messenger surfaces that
  answer through jobs (Slack, Telegram): dedupe, the sealed question, the answer's state,
  ingress cursors.
* :mod:`search2o.surfaces.connect` and :mod:`search2o.surfaces.turns`: how those jobs reach
  our API (one client per process), whom an answer speaks for, and the chat turn.
* :mod:`search2o.surfaces.mcp`: the MCP server, a surface of its own kind: search tools for an
  external model under the caller's rights, no conversation (``docs/mcp.md``).

A surface itself (Slack, Telegram, Mattermost) calls the server only through
:mod:`search2o.client`; ``docs/surfaces.md`` shows the whole flow on one page. Modules are
imported by their full names (this package re-exports nothing), so :mod:`search2o.accounts`
can use the name rules without an import cycle.
"""
