"""Lustre: the lfs getstripe / lfs df parsers on real published outputs (tests/fixtures, each
with its source), detection on this machine's file systems, and the setstripe argv builder with
its validation. Nothing fakes Lustre: the lfs wrappers are only checked to refuse here."""

from __future__ import annotations

import argparse
import hashlib
import io
import re
import subprocess
from pathlib import Path

import pytest

from iolab.cli.lustre import setup_parser
from iolab.core.errors import LabError
from iolab.core.workspace import workdir
from iolab.hpc import lustre
from iolab.hpc.lustre_parse import (
    parse_dir_default,
    parse_getstripe,
    parse_getstripe_many,
    parse_getstripe_yaml,
    parse_lfs_df,
)
from iolab.hpc.stripes import Component

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "lustre"
REAL = ROOT / "tests" / "fixtures" / "real-outputs"  # sources: its MANIFEST.md
MIB = 1024**2


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def real(name: str) -> str:
    return (REAL / name).read_text(encoding="utf-8")


def extents(layout) -> list[tuple]:
    return [
        (
            c.start,
            c.end,
            c.stripe_count,
            c.stripe_size,
            c.pattern,
            c.stripe_offset,
            c.osts,
            c.instantiated,
        )
        for c in layout.components
    ]


# --- recorded here (tests/fixtures/lustre, sources in SOURCES.md) ---------------------------


def test_plain_numeric_pattern_tab_table_uaf() -> None:
    layout = parse_getstripe(fixture("getstripe_plain_numeric_tabs_uaf.txt"))
    assert layout.path == "example.txt" and not layout.composite
    assert extents(layout) == [(0, None, 3, MIB, "raid0", 1, (1, 6, 11), True)]


def test_plain_one_stripe_hex_group_sdsc() -> None:
    layout = parse_getstripe(fixture("getstripe_plain_one_stripe_sdsc.txt"))
    assert layout.path == "CIFAR-10-images.tar.gz"
    assert extents(layout) == [(0, None, 1, MIB, "raid0", 5, (5,), True)]


def test_directory_default_with_named_pattern_sdsc() -> None:
    text = fixture("getstripe_dir_default_raid0_sdsc.txt")
    assert parse_dir_default(text) == Component(
        0, None, MIB, 4, (), "raid0", -1, instantiated=False
    )
    assert list(parse_getstripe_many(text)) == ["striped/"]


def test_composite_directory_default_with_data_on_mdt_lustre_demo() -> None:
    layout = parse_getstripe(fixture("getstripe_pfl_dir_default_dom_lustre-demo.txt"))
    assert layout.path == "testdir1" and layout.composite
    assert extents(layout) == [
        (0, 65536, 0, 65536, "mdt", -1, (), False),
        (65536, None, -1, MIB, "raid0", -1, (), False),
    ]
    assert [c.component_id for c in layout.components] == [None, None]  # lcme_id: N/A
    with pytest.raises(LabError, match="parse_getstripe"):
        parse_dir_default(fixture("getstripe_pfl_dir_default_dom_lustre-demo.txt"))


def test_yaml_pfl_with_self_extending_component_plotter() -> None:
    layout = parse_getstripe_yaml(fixture("getstripe_yaml_pfl_extension_plotter.yaml"))
    assert layout.path is None and layout.composite
    assert extents(layout) == [
        (0, 64 * MIB, 2, 4 * MIB, "raid0", 0, (0, 1), True),
        (64 * MIB, 128 * MIB, 0, 0, "raid0", -1, (), False),
        (128 * MIB, None, 2, 8 * MIB, "raid0", -1, (), False),
    ]
    assert [c.extension_size for c in layout.components] == [None, 64 * MIB, None]
    assert [c.pool for c in layout.components] == ["disk"] * 3
    assert [c.component_id for c in layout.components] == [1, 2, 3]


def test_lfs_df_human_readable_lustre_vagrant() -> None:
    frame = parse_lfs_df(fixture("lfs_df_h_lustre-vagrant.txt"))
    assert frame["target"].tolist() == [
        "users-MDT0000_UUID",
        "users-OST0000_UUID",
        "users-OST0001_UUID",
        "filesystem_summary",
    ]
    assert frame["kind"].tolist() == ["MDT", "OST", "OST", "summary"]
    assert frame["index"].iloc[:3].tolist() == [0, 0, 1]
    assert frame["used_pct"].tolist() == [1, 25, 1, 13]
    # -h values are rounded by lfs; base 1024: 2.6G and 660.0M
    assert frame["total_bytes"].iloc[1] == round(2.6 * 1024**3)
    assert frame["used_bytes"].iloc[1] == 660 * MIB
    assert set(frame["mount"]) == {"/users"} and set(frame["fs_name"]) == {"users"}


# --- real outputs (tests/fixtures/real-outputs/MANIFEST.md) ---------------------------------


def test_real_a1_csc_spaces() -> None:
    layout = parse_getstripe(real("getstripe_raid0_4stripes_csc.txt"))
    assert layout.path == "experiments/new_file"
    assert extents(layout) == [(0, None, 4, MIB, "raid0", 6, (6, 1, 19, 15), True)]


def test_real_a2_sdsc_tabs_hex_group() -> None:
    layout = parse_getstripe(real("getstripe_raid0_tabs_hexgroup_sdsc.txt"))
    assert layout.path == "striped/ILSVRC2012_img_val.tar"
    assert extents(layout) == [(0, None, 4, MIB, "raid0", 65, (65, 18, 61, 11), True)]


def test_real_a3_abci_numeric_pattern() -> None:
    layout = parse_getstripe(real("getstripe_pattern1_numeric_abci.txt"))
    assert layout.path == "stripe-file"
    assert extents(layout) == [(0, None, 4, MIB, "raid0", 4, (4, 5, 6, 7), True)]


def test_real_a4_lumi_one_line_default() -> None:
    assert parse_dir_default(real("getstripe_dir_default_d_lumi.txt")) == Component(
        0, None, MIB, 1, (), "raid0", -1, instantiated=False
    )


def test_real_a5_directory_listing_two_records() -> None:
    layouts = parse_getstripe_many(real("getstripe_dir_listing_empty_pattern_charmedhpc.txt"))
    assert list(layouts) == ["/mnt/lustre", "/mnt/lustre/afile"]
    assert extents(layouts["/mnt/lustre"]) == [(0, None, 1, 4 * MIB, "raid0", -1, (), False)]
    assert extents(layouts["/mnt/lustre/afile"]) == [(0, None, 1, 4 * MIB, "raid0", 1, (1,), True)]
    with pytest.raises(LabError, match="parse_getstripe_many"):
        parse_getstripe(real("getstripe_dir_listing_empty_pattern_charmedhpc.txt"))


def test_real_a6_pfl_composite_manual() -> None:
    layout = parse_getstripe(real("getstripe_pfl_composite_manual.txt"))
    assert layout.path == "/mnt/testfs/create_comp" and layout.composite
    assert extents(layout) == [
        (0, 4 * MIB, 1, MIB, "raid0", 0, (0,), True),
        (4 * MIB, 64 * MIB, 4, MIB, "raid0", 1, (1, 2, 3, 4), True),
        (64 * MIB, None, 8, MIB, "raid0", 4, (4, 5, 6, 7, 0, 1, 2, 3), True),
    ]
    assert [c.component_id for c in layout.components] == [1, 2, 3]


def test_real_a7_data_on_mdt_manual() -> None:
    layout = parse_getstripe(real("getstripe_dom_mdt_manual.txt"))
    assert layout.path == "/mnt/lustre/domfile"
    assert extents(layout) == [
        (0, MIB, 0, MIB, "mdt", 2, (), True),
        (MIB, None, 2, 4 * MIB, "raid0", 0, (0, 1), True),
    ]


def test_real_a8_yaml_plain() -> None:
    layout = parse_getstripe_yaml(real("getstripe_yaml_plain_plotter.yaml"))
    assert not layout.composite
    assert extents(layout) == [(0, None, 8, 2 * MIB, "raid0", 5, (5, 7, 0, 3, 1, 4, 6, 2), True)]


def test_real_a9_yaml_pfl_only_first_instantiated() -> None:
    layout = parse_getstripe_yaml(real("getstripe_yaml_pfl_plotter.yaml"))
    assert extents(layout) == [
        (0, MIB, 1, MIB, "raid0", 1, (1,), True),
        (MIB, 8 * MIB, 2, MIB, "raid0", -1, (), False),
        (8 * MIB, 100 * 1024**3, 2, MIB, "raid0", -1, (), False),
        (100 * 1024**3, None, 2, MIB, "raid0", -1, (), False),
    ]
    assert [c.pool for c in layout.components] == ["disk", "flash", "disk", "disk"]


def test_real_a10_yaml_overstriped_keeps_repeated_osts() -> None:
    layout = parse_getstripe_yaml(real("getstripe_yaml_overstriped_plotter.yaml"))
    (component,) = layout.components
    assert layout.composite and component.component_id == 65537
    assert (component.stripe_count, component.pattern, component.pool) == (
        20,
        "raid0,overstriped",
        "disk",
    )
    assert component.osts == (1, 0) * 10


def test_csc_excerpt_is_refused_unless_partial() -> None:
    text = (REAL / "getstripe_excerpt_3_of_24_csc.txt").read_text(encoding="utf-8")
    with pytest.raises(LabError, match="lists 3 OSTs but its stripe count is 24"):
        parse_getstripe(text)
    layout = parse_getstripe(text, allow_partial=True)
    assert extents(layout) == [(0, None, 24, MIB, "raid0", 22, (22, 8, 4), True)]


def test_real_b1_lfs_df_demo() -> None:
    frame = parse_lfs_df(real("lfs_df_lustre-demo.txt"))
    kib = [
        [41699840, 3840, 41693952],
        [50019328, 3584, 50013696],
        [98706432, 5615616, 93088768],
        [100038656, 3591168, 96445440],
        [198745088, 9206784, 189534208],
    ]
    columns = ["total_bytes", "used_bytes", "available_bytes"]
    assert frame[columns].values.tolist() == [[v * 1024 for v in row] for row in kib]
    assert frame["kind"].tolist() == ["MDT", "MDT", "OST", "OST", "summary"]
    assert frame["used_pct"].tolist() == [1, 1, 6, 4, 5]
    osts = frame[frame["kind"] == "OST"]
    assert osts["total_bytes"].sum() == frame["total_bytes"].iloc[-1]


def test_real_b2_lfs_df_four_file_systems() -> None:
    frame = parse_lfs_df(real("lfs_df_multi_fs_nersc_pytokio.txt"))
    targets = frame[frame["kind"] != "summary"]
    assert len(targets) == 340 and (frame["kind"] == "summary").sum() == 4
    assert (targets["kind"] == "MDT").sum() == 8 and (targets["kind"] == "OST").sum() == 332
    osts = targets[targets["kind"] == "OST"].groupby("fs_name")["index"]
    assert osts.count().to_dict() == {
        "snx11025": 24,
        "snx11035": 24,
        "snx11036": 36,
        "snx11168": 248,
    }
    assert osts.max().to_dict() == {"snx11025": 23, "snx11035": 23, "snx11036": 35, "snx11168": 247}
    summary = frame[frame["kind"] == "summary"].set_index("mount")
    assert summary.loc[
        "/global/cscratch1", ["total_bytes", "used_bytes", "available_bytes"]
    ].tolist() == [v * 1024 for v in (29763608416864, 13195383146952, 16238309957828)]
    assert summary["used_pct"].to_dict() == {
        "/scratch2": 74,
        "/scratch3": 76,
        "/global/cscratch1": 45,
        "/scratch1": 72,
    }
    for fs_name, group in targets[targets["kind"] == "OST"].groupby("fs_name"):
        total = frame[(frame["kind"] == "summary") & (frame["fs_name"] == fs_name)]
        assert group["available_bytes"].sum() == total["available_bytes"].item()
    row = targets.set_index("target").loc["snx11168-OST00f7_UUID"]
    assert (row["index"], row["used_bytes"], row["used_pct"]) == (247, 52687340108 * 1024, 44)
    mdt3 = targets.set_index("target").loc["snx11168-MDT0003_UUID"]
    assert (mdt3["index"], mdt3["used_pct"]) == (3, 0)


def test_real_b3_lfs_df_inodes_as_printed() -> None:
    frame = parse_lfs_df(real("lfs_df_i_manual.txt"))
    assert "total_bytes" not in frame
    assert frame[["total_inodes", "used_inodes", "free_inodes", "used_pct"]].values.tolist() == [
        [1910263, 1910263, 0, 100],
        [947456, 360059, 587397, 89],
        [948864, 233748, 715116, 91],
        [947456, 549961, 397495, 89],
        [1426144, 477595, 948549, 95],
        [1426080, 465248, 1420832, 57],
        [1910263, 1910263, 0, 100],
    ]
    assert frame["index"].iloc[:6].tolist() == [0, 0, 1, 2, 3, 4]
    assert frame["mount"].iloc[0] == "/myth" and frame["kind"].iloc[-1] == "summary"


# --- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "hello world\nthis is not lfs output\n", "{}"])
def test_garbage_getstripe_text_is_one_clear_error(text: str) -> None:
    with pytest.raises(LabError, match="no `lfs getstripe` fields"):
        parse_getstripe(text)


def test_missing_stripe_size_is_named() -> None:
    text = fixture("getstripe_plain_numeric_tabs_uaf.txt").replace("lmm_stripe_size:", "x:")
    with pytest.raises(LabError, match="has no lmm_stripe_size field"):
        parse_getstripe(text)


def test_missing_component_extent_and_entry_count_mismatch() -> None:
    text = fixture("getstripe_yaml_pfl_extension_plotter.yaml")
    with pytest.raises(LabError, match="no lcme_extent.e_end field"):
        parse_getstripe(text.replace("lcme_extent.e_end:   EOF", ""))
    with pytest.raises(LabError, match="lcm_entry_count is 4 but 3 components"):
        parse_getstripe(text.replace("lcm_entry_count:   3", "lcm_entry_count:   4"))


def test_garbage_lfs_df_is_one_clear_error() -> None:
    with pytest.raises(LabError, match="cannot read the `lfs df` line"):
        parse_lfs_df("some text that is not lfs df\n")
    with pytest.raises(LabError, match="no MDT or OST rows"):
        parse_lfs_df("UUID 1K-blocks Used Available Use% Mounted on\n")
    with pytest.raises(LabError, match="run `lfs df -i` without -h"):
        parse_lfs_df(
            "UUID Inodes IUsed IFree IUse% Mounted on\n"
            "fs-MDT0000_UUID 1.2M 3.0K 1.2M 1% /fs[MDT:0]\n"
        )


# --- detection on this machine -------------------------------------------------------------


@pytest.mark.parametrize("where", [Path("/"), workdir()])
def test_detection_matches_stat_and_mount_table(where: Path) -> None:
    where.mkdir(parents=True, exist_ok=True)
    expected = subprocess.run(
        ["stat", "-f", "-c", "%t", str(where)], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert lustre.statfs_magic(where) == int(expected, 16)
    status = lustre.lustre_status(where)
    assert status.magic_hex == hex(int(expected, 16))
    assert status.fs_type == lustre.filesystem_type(where)
    if status.fs_type != "lustre" and int(expected, 16) != lustre.LL_SUPER_MAGIC:
        assert not lustre.is_lustre(where) and not status.on_lustre
        assert "not Lustre" in status.explanation


def test_statfs_of_a_missing_path_is_a_lab_error(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="cannot statfs"):
        lustre.statfs_magic(tmp_path / "missing")


def test_wrappers_refuse_off_lustre() -> None:
    where = workdir()
    where.mkdir(parents=True, exist_ok=True)
    if lustre.is_lustre(where):
        pytest.skip("the workspace is on Lustre here")
    for call in (
        lambda: lustre.getstripe(where),
        lambda: lustre.lfs_df(where),
        lambda: lustre.getstripe_dir_default(where),
        lambda: lustre.setstripe(where / "new", count=2),
    ):
        with pytest.raises(LabError, match="not Lustre"):
            call()


# --- the setstripe argv builder --------------------------------------------------------------


def test_setstripe_plain_argv() -> None:
    assert lustre.setstripe_command("dir", count=4, size=MIB) == [
        "lfs",
        "setstripe",
        "-c",
        "4",
        "-S",
        "1048576",
        "dir",
    ]
    assert lustre.setstripe_command("f", size=MIB, index=10, count=4, pool="flash") == [
        "lfs",
        "setstripe",
        "-c",
        "4",
        "-S",
        "1048576",
        "-i",
        "10",
        "-p",
        "flash",
        "f",
    ]
    assert lustre.setstripe_command("f", ost_list=[1, 2, 3, 7]) == [
        "lfs",
        "setstripe",
        "-o",
        "1,2,3,7",
        "f",
    ]


def test_setstripe_pfl_argv() -> None:
    argv = lustre.setstripe_command(
        "f",
        components=[(4 * MIB, 1, MIB), {"end": 64 * MIB, "count": 4}, {"end": None, "count": -1}],
    )
    assert argv == [
        "lfs",
        "setstripe",
        "-E",
        "4194304",
        "-c",
        "1",
        "-S",
        "1048576",
        "-E",
        "67108864",
        "-c",
        "4",
        "-E",
        "-1",
        "-c",
        "-1",
        "f",
    ]
    argv = lustre.setstripe_command(
        "f", components=[{"end": MIB, "layout": "mdt"}, {"end": -1, "size": 4 * MIB, "count": -1}]
    )
    assert argv == [
        "lfs",
        "setstripe",
        "-E",
        "1048576",
        "-L",
        "mdt",
        "-E",
        "-1",
        "-c",
        "-1",
        "-S",
        "4194304",
        "f",
    ]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"size": 100_000}, "not a positive multiple of 64 KiB"),
        ({"size": 0}, "not a positive multiple of 64 KiB"),
        ({"count": -2}, "below -1"),
        ({"count": 2.5}, "whole number"),
        ({"index": -3}, "below -1"),
        ({"count": 3, "ost_list": [1, 2]}, "differs from the 2 OSTs"),
        ({"pool": "two words"}, "non-empty word"),
        ({}, "give at least one"),
        ({"count": 2, "components": [(MIB, 1, MIB)]}, "not both"),
        ({"components": []}, "components is empty"),
        ({"components": [(8 * MIB, 1, MIB), (4 * MIB, 2, MIB)]}, "component ends must increase"),
        ({"components": [(None, 1, MIB), (8 * MIB, 2, MIB)]}, "only the last component"),
        ({"components": [(3 * MIB, 1, 2 * MIB)]}, "not a multiple of its stripe size"),
        ({"components": [{"end": MIB, "layout": "mdt", "count": 1}]}, "takes no stripe count"),
        ({"components": [{"count": 1}]}, "needs an 'end'"),
        ({"components": [(MIB, 1, MIB, 0)]}, r"\(end, count, size\) or shorter"),
    ],
)
def test_setstripe_validation_messages(options: dict, message: str) -> None:
    with pytest.raises(LabError, match=message):
        lustre.setstripe_command("f", **options)


# --- the command line -----------------------------------------------------------------------


def run_cli(argv: list[str], capsys, stdin: str | None = None, monkeypatch=None) -> str:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    setup_parser(commands)
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    args = parser.parse_args(argv)
    assert args.func(args) == 0
    return capsys.readouterr().out


def test_cli_status_on_the_workspace(capsys) -> None:
    out = run_cli(["lustre", "status", str(workdir())], capsys)
    assert "on_lustre" in out and "statfs_magic" in out and "explanation" in out


def test_cli_getstripe_from_file_and_stdin(capsys, monkeypatch) -> None:
    out = run_cli(
        ["lustre", "getstripe", str(FIXTURES / "getstripe_yaml_pfl_extension_plotter.yaml")], capsys
    )
    lines = out.splitlines()
    assert len(lines) == 2 + 3 and "EOF" in lines[-1] and "0,1" in lines[2]
    out = run_cli(
        ["lustre", "getstripe", "-"],
        capsys,
        stdin=fixture("getstripe_plain_numeric_tabs_uaf.txt"),
        monkeypatch=monkeypatch,
    )
    assert "1,6,11" in out and "1048576" in out


def test_cli_getstripe_missing_file_is_a_lab_error(tmp_path: Path, capsys) -> None:
    with pytest.raises(LabError, match="does not exist"):
        run_cli(["lustre", "getstripe", str(tmp_path / "nope.txt")], capsys)


def test_every_real_output_matches_the_checksum_its_manifest_gives() -> None:
    """The parser tests are only as good as their fixtures: none may change unnoticed."""
    manifest = (REAL / "MANIFEST.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"### \S+ `([^`]+)`.*?sha256: ([0-9a-f]{64})", manifest, re.S))
    on_disk = {p.name for p in REAL.iterdir() if p.name != "MANIFEST.md"}
    assert set(listed) == on_disk
    for name, digest in listed.items():
        assert hashlib.sha256((REAL / name).read_bytes()).hexdigest() == digest, name
