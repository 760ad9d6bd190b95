"""``python -m fp8ref``: the same command line as the ``fp8ref`` console script."""

from fp8ref.bringup.cli import main

raise SystemExit(main())
