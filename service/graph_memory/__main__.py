"""``python -m graph_memory`` runs the ``graph-memory`` command."""

import sys

from graph_memory.cli import main

sys.exit(main())
