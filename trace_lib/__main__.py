"""``python -m trace_lib`` is the ``trace-repro`` command."""

from trace_lib.cli.main import main

raise SystemExit(main())
