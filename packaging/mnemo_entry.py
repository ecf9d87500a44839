"""Entry script of the frozen app (PyInstaller needs a script, not a `module:function`).

It does exactly what the `mnemo` console script does (`ui.launcher:main`); nothing else
belongs here, so the frozen and the pip-installed app behave the same.
"""

import multiprocessing
import sys

if __name__ == "__main__":
    # No-op except in a frozen Windows/macOS child started by multiprocessing (llama_cpp and
    # onnxruntime import multiprocessing; Mnemo itself starts no such child today).
    multiprocessing.freeze_support()
    from ui.launcher import main

    sys.exit(main())
