"""The figures the docs quote from runs are those runs' (issue 28: docs/campaigns.md said 1.13
for case 31's peak torque ratio long after the physics had made it 8). Each generated block
(between ``<!-- generated: NAME ... -->`` and ``<!-- end generated: NAME -->``) is made again
here by its generator in test/helpers/docs_rows.py, from the scenarios the physics tests
assert on, and must equal what its page shows. When the physics changes them on purpose:
``python tools/docs_rows.py --write NAME`` writes the new block into the page. Timings are
not generated (docs/maintaining.md)."""

from __future__ import annotations

import re

import pytest

from helpers import ROOT
from helpers.docs_rows import BLOCKS, difference, markers_in, pct, replace, sci, shown


@pytest.mark.parametrize("name", list(BLOCKS))
def test_the_generated_block_is_this_runs(name):
    block = BLOCKS[name]
    block.needs()
    diff = difference(block, block.make())
    assert not diff, diff


def test_every_marked_block_has_a_generator_and_every_generator_its_block():
    pages = sorted({b.page for b in BLOCKS.values()} | {str(p.relative_to(ROOT)) for p in
                                                 [*ROOT.glob("docs/*.md"), ROOT / "README.md"]})
    marked = {}
    for page in pages:
        for name in markers_in((ROOT / page).read_text()):
            assert name not in marked, f"{name} marked in {marked[name]} and {page}"
            marked[name] = page
    assert marked == {name: b.page for name, b in BLOCKS.items()}
    for block in BLOCKS.values():
        shown(block)  # exactly one, closed


def test_a_stale_block_is_told_with_its_diff_and_the_refresh_command(tmp_path, monkeypatch):
    """The check above can fail: a block whose page differs by one digit is reported, with
    the line that differs and the command; writing it back gives the page its block."""
    import helpers.docs_rows as rows
    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    text = ("intro\n\n  <!-- generated: t (tools/docs_rows.py --write t) -->\n  | a | b |\n"
            "  |---|---|\n  | 1 | 2.5 |\n  <!-- end generated: t -->\n\nafter\n")
    page.write_text(text)
    monkeypatch.setattr(rows, "ROOT", tmp_path)
    block = rows.Block("t", "docs/page.md", lambda: "| a | b |\n|---|---|\n| 1 | 2.6 |", "a test")
    monkeypatch.setitem(rows.BLOCKS, "t", block)
    assert shown(block) == "| a | b |\n|---|---|\n| 1 | 2.5 |"
    diff = difference(block, block.make())
    assert "-| 1 | 2.5 |" in diff and "+| 1 | 2.6 |" in diff
    assert "python tools/docs_rows.py --write t" in diff
    assert rows.write(["t"], log=lambda _: None) == ["t"]
    assert page.read_text() == text.replace("2.5", "2.6")  # indentation and the rest kept
    assert difference(block, block.make()) == ""
    with pytest.raises(LookupError, match="exactly one"):
        replace("no markers", "t", "x")


def test_the_formats_round_and_sign_as_the_pages_do():
    assert pct(-0.0016) == "\u22120.16 %" and pct(0.005, 1) == "+0.5 %"
    assert sci(7.5e-4) == "7.5e-4" and sci(-4.2e-5, 1) == "\u22124e-5"
    assert re.fullmatch(r"\d\.\de-\d+", sci(2.5e-3))
