"""Runs the harness under the project's virtualenv (~/.cache/shale-venv, shared with the test
suite) so that matplotlib comes from PyPI without touching the system's Python."""

import os
import subprocess
import sys

VENV = os.path.expanduser("~/.cache/shale-venv")


def reexec_with(packages):
    try:
        for package in packages:
            __import__(package)
        return
    except ImportError:
        pass
    python = os.path.join(VENV, "bin", "python")
    if os.environ.get("SHALE_COMPARE_VENV"):
        sys.exit(f"{packages} still missing under {python}")
    if not os.path.exists(python):
        if subprocess.run([sys.executable, "-m", "venv", VENV]).returncode != 0:
            subprocess.run(["apt-get", "install", "-y", "-qq", "python3-venv"], check=True)
            subprocess.run([sys.executable, "-m", "venv", "--clear", VENV], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", *packages], check=True)
    os.environ["SHALE_COMPARE_VENV"] = "1"
    os.execv(python, [python, *sys.argv])
