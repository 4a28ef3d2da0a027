"""Write the generated reference pages (docs/reference/): the command-line reference from the parsers,
the metric and dialogue-metric cards from their declared metadata, every profile and recipe key and every
run file from their msgspec structs, and the HTTP API from the service's OpenAPI document.

    python scripts/gen_reference.py          # write them
    python scripts/gen_reference.py --check  # exit 1 when a page is not what the code gives
"""

from __future__ import annotations

import sys
from pathlib import Path

from simhub.cli.pages import generated_pages

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    pages = {ROOT / name: text for name, text in generated_pages().items()}
    stale = [path for path, text in pages.items() if not path.is_file() or path.read_text(encoding="utf-8") != text]
    if "--check" in argv:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is out of date: run python scripts/gen_reference.py", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(pages[path], encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
