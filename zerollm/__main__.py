"""``python -m zerollm`` is the same as the ``zerollm`` command."""

from zerollm.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
