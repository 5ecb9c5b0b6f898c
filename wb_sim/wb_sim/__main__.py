import sys

from .tools.demo import main

sys.exit(main())
