import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # see ui/launcher.py

from app.cli import main

sys.exit(main())
