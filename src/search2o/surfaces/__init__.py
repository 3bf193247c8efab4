"""What every surface shares: who a message acts as, and which conversation a thread continues.

* :mod:`search2o.surfaces.names`: the rules for surface, workspace, channel, thread and
  external user names (one validator for all of them).
* :mod:`search2o.surfaces.identity`: surface identities (an external account linked to a user,
  by a platform-verified email or a one-time link code), link codes, the shared-channel
  principal, and the ``X-Search2o-Act-As`` rule of surface service tokens.
* :mod:`search2o.surfaces.threads`: the mapping of (surface, workspace, channel, thread) to a
  conversation.

A surface itself (Slack, Telegram, Mattermost) calls the server only through
:mod:`search2o.client`; ``docs/surfaces.md`` shows the whole flow on one page. Modules are
imported by their full names (this package re-exports nothing), so :mod:`search2o.accounts`
can use the name rules without an import cycle.
"""
