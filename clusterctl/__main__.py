"""`python -m clusterctl` runs the command line."""

import sys

from clusterctl.cli import main

sys.exit(main())
