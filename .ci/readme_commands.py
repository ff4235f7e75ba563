"""Print the README's set-up commands, exactly as written, for .ci/run to run.

    python .ci/readme_commands.py install   # the first sh block under "## Install"
    python .ci/readme_commands.py tests     # the first sh block under "## Contributing"
"""

import re
import sys
from pathlib import Path

SECTIONS = {"install": "## Install", "tests": "## Contributing"}


def commands(readme: str, section: str) -> str:
    text = readme.split(SECTIONS[section] + "\n", 1)[1]
    block = re.search(r"^```sh\n(.*?)^```", text, re.S | re.M)
    if block is None:
        raise SystemExit(f"README.md: no sh block under {SECTIONS[section]!r}")
    return block.group(1)


if __name__ == "__main__":
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    sys.stdout.write(commands(readme, sys.argv[1]))
