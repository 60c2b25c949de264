"""The code lines a call runs, read from a callgrind dump (bench/callgrind_lines.py): a dump written
by hand in callgrind's format, with its compressed names, relative addresses and call lines."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import callgrind_lines  # noqa: E402

DUMP = """\
# callgrind format
version: 1
creator: callgrind-3.19.0
positions: instr line
events: Ir

ob=(1) /opt/module/libfilter.so
fl=(1) filter.rs
fn=(1) decide
0x1000 10 300
+4 * 300
+60 11 150
cob=(2) /usr/bin/envoy
cfn=(2) callback
calls=300 0x500000 1
* * 9000
+8 12 60
ob=(2)
fl=(2) envoy.cc
fn=(2)
0x500000 1 900
+2 * 900
ob=(1)
fl=(1)
fn=(1)
0x10c0 20 30
"""


def test_lines_per_call_by_object(tmp_path):
    dump = tmp_path / "callgrind.out"
    dump.write_text(DUMP)
    got = callgrind_lines.lines_per_call(dump, 300)
    # libfilter.so: line 0x1000 run by every call (1), line 0x1040 by half of them (its most-run
    # instruction 150 times; the call's inclusive 9,000 is not its own), line 0x10c0 by a tenth.
    # envoy: one line, run three times a call, counts once.
    assert got == {"libfilter.so": pytest.approx(1.6), "envoy": pytest.approx(1.0)}


def test_a_dump_without_instruction_addresses_is_refused(tmp_path):
    dump = tmp_path / "callgrind.out"
    dump.write_text(DUMP.replace("positions: instr line", "positions: line"))
    with pytest.raises(ValueError, match="--dump-instr=yes"):
        callgrind_lines.lines_per_call(dump, 300)


def test_pages_per_call_from_the_same_read(tmp_path):
    dump = tmp_path / "callgrind.out"
    # The module's third line moved to the next 4 KiB page: still three lines, now two pages.
    dump.write_text(DUMP.replace("0x10c0 20 30", "0x2000 20 30"))
    got = callgrind_lines.spans_per_call(dump, 300, (callgrind_lines.LINE, callgrind_lines.PAGE))
    assert got[callgrind_lines.LINE] == {"libfilter.so": pytest.approx(1.6), "envoy": pytest.approx(1.0)}
    # Page 0x1000: its lines' most-run instruction ran 300 times (1); page 0x2000: 30 (a tenth).
    assert got[callgrind_lines.PAGE] == {"libfilter.so": pytest.approx(1.1), "envoy": pytest.approx(1.0)}
    assert callgrind_lines.lines_per_call(dump, 300) == got[callgrind_lines.LINE]
