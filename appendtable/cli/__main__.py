"""``python -m appendtable.cli``: the same as the ``appendtable`` console script."""

from appendtable.cli import main

raise SystemExit(main())
