"""Regenerates the docs' measured blocks (test/helpers/docs_rows.py: the markers, the
generators, the runs behind each). Run from the repository root:

    .venv/bin/python tools/docs_rows.py            # says which blocks are stale, with a diff
    .venv/bin/python tools/docs_rows.py --write    # writes every block into its page
    .venv/bin/python tools/docs_rows.py --write friction gyroscopic   # only those

test/tools/test_docs_rows.py fails while a block differs from its run. Timings (µs, steps/s,
real-time factors) are not generated: docs/maintaining.md says how they are kept.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))  # the test tree's root

from helpers.docs_rows import BLOCKS, difference, write  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"blocks (default: all): {', '.join(BLOCKS)}")
    parser.add_argument("--write", action="store_true", help="write them into the pages")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in BLOCKS]
    if unknown:
        parser.error(f"no block {', '.join(unknown)}; the blocks: {', '.join(BLOCKS)}")
    if args.write:
        write(args.names or None)
        return 0
    stale = 0
    for name in args.names or list(BLOCKS):
        diff = difference(BLOCKS[name], BLOCKS[name].make())
        print(diff or f"{name}: up to date")
        stale += bool(diff)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
