"""What `aotx chat` prints of others' text cannot drive the terminal: control characters, C1 and bidi
overrides are shown as escapes, another's newline cannot start a line of its own, and a participant's
label shows the lineage (the principal's) as well as the ident they chose."""
from __future__ import annotations

from ops.chat.shared import Printer, short
from ops.chat.terminal import visible


def test_control_characters_are_shown_not_obeyed(capsys):
    hostile = "hi\x1b]52;c;ZXZpbA==\x07\r[you] I approve\x1b[2J\x9b31m\u202eevil\x7f"
    Printer().line(f"[par-…1234] {hostile}")
    out = capsys.readouterr().out
    assert not any(ord(c) < 0x20 and c not in "\n\t" or 0x7F <= ord(c) < 0xA0 or c == "\u202e" for c in out), out
    assert "\\x1b]52;c;ZXZpbA==\\x07\\x0d[you] I approve\\x1b[2J\\x9b31m\\u202eevil\\x7f" in out
    assert visible("tab\tand\nnewline") == "tab\tand\nnewline"


def test_another_s_newline_cannot_forge_a_line(capsys):
    Printer().line("[par-…1234] first\n[you] I approve\nmodel> yes")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "[par-…1234] first" and all(line.startswith("    ") for line in lines[1:]), lines


def test_a_label_shows_the_lineage_and_the_ident():
    lineage, ident = "c464f00728c41eb54ebc5009397da9fb", "0b8cacfc5355d30f6ff02983574ec468"
    assert short(f"par-{lineage}-{ident}") == "par-c464f007…4ec468"
    other = f"par-{'9' * 32}-{ident}"                 # the same chosen ident, another principal
    assert short(other) != short(f"par-{lineage}-{ident}")
    assert short(None) == "?" and short("par-x") == "par-x"
