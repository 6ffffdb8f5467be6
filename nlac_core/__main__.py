import sys

from nlac_core.cli import main

sys.exit(main())
