"""``python -m chaos``: run the chaos test (see chaos/run.py)."""

from chaos.run import main

raise SystemExit(main())
