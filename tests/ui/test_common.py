"""ui.common's Markdown escaping: text from data reads as its characters, plain text unchanged."""

from __future__ import annotations

from tests.fakes.hostile import MD_IMAGE
from ui.common import md_code, md_escape


def test_md_escape_escapes_syntax_and_keeps_plain_text() -> None:
    assert md_escape(MD_IMAGE) == "!\\[x\\](http\\://127.0.0.1:9/x.png)"
    assert md_escape("**a** <b> `c` _d_ ~e~ $f$ | &amp;") == (
        "\\*\\*a\\*\\* \\<b\\> \\`c\\` \\_d\\_ \\~e\\~ \\$f\\$ \\| \\&amp;"
    )
    assert md_escape("# h\n\n- item\r\n1. x") == "\\# h  - item  1. x"
    assert md_escape("- item") == "\\- item" and md_escape("12. x") == "12\\. x"
    assert md_escape("see www.example.com") == "see www\\.example.com"
    assert md_escape(":red[x]") == ":red\\[x\\]"  # a colour directive needs its bracket
    assert md_escape("max-num-seqs = 16, 1,234.5 ms") == "max-num-seqs = 16, 1,234.5 ms"
    assert md_escape(None) == "None" and md_escape(3) == "3"


def test_md_code_fences_past_any_backticks() -> None:
    assert md_code("a`b``c\n\nd") == "``` a`b``c  d ```"
