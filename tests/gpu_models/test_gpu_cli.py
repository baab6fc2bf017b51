"""The calculator commands: JSON output, sweeps and plots, one-line errors with exit code 2."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from aiprof.cli.main import main


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_occupancy_textbook_and_real_sm90(capsys):
    book = _json(capsys, ["occupancy", "--arch", "textbook", "--block-size", "256",
                          "--registers", "32", "--shared-mem", "8K", "--json"])
    assert (book["active_blocks_per_sm"], book["occupancy"]) == (6, 0.75)
    real = _json(capsys, ["occupancy", "--arch", "NVIDIA H200", "--block-size", "256",
                          "--registers", "32", "--shared-mem", "8192", "--json"])
    assert (real["active_blocks_per_sm"], real["allocated_shared_mem_per_block_bytes"]) == (8,
                                                                                           9216)


def test_occupancy_user_defined_sm_overrides(capsys):
    # The textbook SM built from sm_90 by overriding its limits (reserve removed, 48 KB SM).
    data = _json(capsys, ["occupancy", "--arch", "sm_90", "--block-size", "256",
                          "--shared-mem", "8K", "--sm-blocks", "16", "--sm-shared-mem", "48K",
                          "--reserved-shared-mem", "0", "--json"])
    # 49,152 B per SM / 8,192 B per block = 6 blocks = 48 of 64 warps.
    assert (data["active_blocks_per_sm"], data["occupancy"]) == (6, 0.75)


def test_occupancy_sweep_and_plot(capsys, tmp_path):
    svg = tmp_path / "regs.svg"
    data = _json(capsys, ["occupancy", "--arch", "sm_90", "--block-size", "256",
                          "--sweep", "registers", "--plot", str(svg), "--json"])
    assert data["values"][:3] == [0, 1, 2] and len(data["points"]) == 256
    occ = [p["occupancy"] for p in data["points"]]
    assert occ == sorted(occ, reverse=True)
    assert ET.parse(svg).getroot().tag.endswith("svg")
    assert main(["occupancy", "--arch", "sm_90", "--block-size", "128",
                 "--sweep", "block-size"]) == 0
    out = capsys.readouterr().out
    assert "Occupancy vs block-size" in out
    # 32 registers: 64 warps fit at any size; the runtime keeps the largest block.
    assert "would pick: 1024 (100.0%)" in out


@pytest.mark.parametrize("argv", [
    ["occupancy", "--arch", "sm_90", "--block-size", "0"],
    ["occupancy", "--arch", "sm_90", "--block-size", "2048"],
    ["occupancy", "--arch", "sm_90", "--block-size", "256", "--registers", "-4"],
    ["occupancy", "--arch", "sm_77", "--block-size", "256"],
    ["occupancy", "--arch", "sm_90", "--block-size", "256", "--shared-mem", "lots"],
    ["occupancy", "--arch", "sm_90", "--block-size", "256", "--plot", "x.svg"],
    ["coalescing", "--stride", "1", "--elem-bytes", "3"],
    ["coalescing", "--addresses", "0,4,8"],
    ["banks"],
    ["banks", "--tile", "64x32"],
    ["divergence", "--lanes", "a,b"],
    ["divergence", "--costs", "even=100"],
])
def test_bad_input_is_one_line_exit_2(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_coalescing_strides_json(capsys):
    rows = _json(capsys, ["coalescing", "--stride", "1,2,32", "--json"])
    assert [r["sectors_per_request"] for r in rows] == [4, 8, 32]
    assert rows[2]["efficiency"] == 4 / 32 and rows[2]["legacy_efficiency"] == 4 / 128


def test_banks_tile_json_suggests_padding(capsys):
    data = _json(capsys, ["banks", "--tile", "32x32", "--json"])
    assert data["column_read"]["wavefronts"] == 32 and data["suggested_pad"] == 1
    padded = _json(capsys, ["banks", "--tile", "32x32", "--pad", "1", "--json"])
    assert padded["column_read"]["conflicts"] == 0


def test_divergence_chapter_example(capsys):
    data = _json(capsys, ["divergence", "--costs", "even=100,odd=10", "--json"])
    assert data["serialized_cost"] == 110 and data["avg_active_threads_per_instruction"] == 16
    assert main(["divergence"]) == 0
    assert "branch" in capsys.readouterr().out.lower()
