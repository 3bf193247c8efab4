"""The test suite; run it with the README's test command (two pytest-xdist workers).

pytest-xdist starts its workers with ``COLUMNS=80`` and ``LINES=24``, and a Rich console made
while both are set keeps that size for good (``rich.console.Console.__init__``), so the CLI's
console, made when ``search2o.cli`` is first imported, would wrap every table at 80 columns
whatever a test asks for. Both are removed before any test module imports the CLI, so a worker
sizes output as a plain run does (a test's own ``COLUMNS`` decides).
"""

import os

for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
