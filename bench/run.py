"""Run every benchmark in this folder (bench_*.py), each in its own process."""

import glob
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

if __name__ == "__main__":
    only = sys.argv[1:]
    status = 0
    for path in sorted(glob.glob(os.path.join(HERE, "bench_*.py"))):
        name = os.path.basename(path)[len("bench_") : -3]
        if only and name not in only:
            continue
        print(f"== {name}", flush=True)
        status |= subprocess.run([sys.executable, path]).returncode
    sys.exit(status)
