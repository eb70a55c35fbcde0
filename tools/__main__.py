import sys

from kraftpy.tools.cli import main

sys.exit(main())
