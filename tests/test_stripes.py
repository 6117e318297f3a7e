"""The layout model, the striping advice and the real-Lustre trial plan.

Layouts used: a plain 4-OST one, the CSC Mahti 24-OST file (rows 0-2 and 22-23 of its obdidx
table were printed by a revision of CSC's page, csc-user-guide commit 9f0ab3797; the rows in
between are filled in for the test),
the 3-component PFL file of the Lustre manual, a PFL layout whose later components start off
their stripe-width (and one off its stripe size), Data-on-MDT, and an overstriped layout.
"""

from __future__ import annotations

import random
import re
from itertools import pairwise
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from iolab.core.errors import LabError  # noqa: E402
from iolab.core.markers import MADE_MARKER  # noqa: E402
from iolab.hpc.stripe_plots import grid_pair, stripes_by_ost  # noqa: E402
from iolab.hpc.stripe_trial import TrialStep, layout_problems, plan_frame, plan_trial  # noqa: E402
from iolab.hpc.stripes import (  # noqa: E402
    EOF,
    INTERLEAVED,
    MDT,
    SEGMENTED,
    Component,
    Layout,
    bytes_per_ost,
    grid_summary,
    is_aligned,
    locate,
    object_extents,
    osts_touched,
    pieces,
    writer_blocks,
    writer_ost_grid,
)
from iolab.hpc.striping_advice import (  # noqa: E402
    GB,
    MiB,
    advice_table,
    advise_stripe_count,
    factor_of_writers,
    lustre_wiki_range,
    nersc_stripe_helper,
    stripe_count_sqrt_rule,
)

KiB = 1024
CSC_OSTS = (22, 8, 4, *range(100, 119), 19, 15)
CSC = Layout.plain(MiB, CSC_OSTS)
PLAIN4 = Layout.plain(64 * KiB, (3, 0, 2, 1))
MANUAL_PFL = Layout(
    (
        Component(0, 4 * MiB, MiB, 1, (0,)),
        Component(4 * MiB, 64 * MiB, MiB, 4, (1, 2, 3, 4)),
        Component(64 * MiB, EOF, MiB, 8, (4, 5, 6, 7, 0, 1, 2, 3)),
    ),
    composite=True,
)
# [256 KiB, 1 MiB + 128 KiB) starts off its 384 KiB stripe width; the last component starts
# at 1152 KiB, which is not a multiple of its own 256 KiB stripe size.
ODD_PFL = Layout(
    (
        Component(0, 256 * KiB, 64 * KiB, 1, (7,)),
        Component(256 * KiB, 1152 * KiB, 128 * KiB, 3, (2, 5, 9)),
        Component(1152 * KiB, EOF, 256 * KiB, 5, (1, 3, 4, 6, 8)),
    ),
    composite=True,
)
DOM = Layout(
    (
        Component(0, MiB, MiB, 0, (), pattern="mdt"),
        Component(MiB, EOF, 4 * MiB, 2, (0, 1)),
    ),
    composite=True,
)
OVERSTRIPED = Layout.plain(64 * KiB, (1, 0, 1, 0, 1, 0))
LAYOUTS = {
    "plain4": PLAIN4,
    "csc": CSC,
    "manual_pfl": MANUAL_PFL,
    "odd_pfl": ODD_PFL,
    "dom": DOM,
    "overstriped": OVERSTRIPED,
}


def test_csc_offsets_by_hand():
    assert locate(CSC, 0) == (22, 0, 0, 0)
    assert locate(CSC, MiB) == (8, 0, 0, 1)
    assert locate(CSC, 2 * MiB + 5) == (4, 5, 0, 2)
    assert locate(CSC, 24 * MiB) == (22, MiB, 0, 0)
    assert locate(CSC, 23 * MiB + 7) == (15, 7, 0, 23)
    assert locate(CSC, 47 * MiB - 1) == (19, 2 * MiB - 1, 0, 22)


def test_pfl_uses_the_absolute_offset():
    assert locate(MANUAL_PFL, 4 * MiB - 1) == (0, 4 * MiB - 1, 0, 0)
    # First byte of component 1: stripe 4 % 4 = 0, object offset (4 MiB // 4 MiB) * 1 MiB.
    assert locate(MANUAL_PFL, 4 * MiB) == (1, MiB, 1, 0)
    assert locate(MANUAL_PFL, 5 * MiB + 7) == (2, MiB + 7, 1, 1)
    assert locate(MANUAL_PFL, 64 * MiB) == (4, 8 * MiB, 2, 0)
    assert locate(MANUAL_PFL, 68 * MiB) == (0, 8 * MiB, 2, 4)
    # 256 KiB // 128 KiB = 2: the component's first byte is on its stripe 2, not stripe 0.
    assert locate(ODD_PFL, 256 * KiB) == (9, 0, 1, 2)
    assert locate(ODD_PFL, 384 * KiB) == (2, 128 * KiB, 1, 0)
    # 1152 KiB // 256 KiB = 4 (a unit that starts at 1024 KiB): stripe 4, 128 KiB into it.
    assert locate(ODD_PFL, 1152 * KiB) == (8, 128 * KiB, 2, 4)


def test_data_on_mdt_and_what_follows():
    assert locate(DOM, 100) == (MDT, 100, 0, 0)
    assert locate(DOM, MiB) == (0, MiB, 1, 0)
    assert locate(DOM, 4 * MiB) == (1, 0, 1, 1)
    assert locate(DOM, 8 * MiB) == (0, 4 * MiB, 1, 0)
    assert osts_touched(DOM, 0, 5 * MiB) == [MDT, 0, 1]
    assert bytes_per_ost(DOM, 0, 5 * MiB) == {MDT: MiB, 0: 3 * MiB, 1: MiB}


@pytest.mark.parametrize(
    "layout, offset, message",
    [
        (Layout((Component(0, MiB, MiB, 1, (0,)),)), MiB, "past the last component"),
        (
            Layout(
                (
                    Component(0, MiB, MiB, 1, (0,)),
                    Component(MiB, EOF, MiB, 2, (), instantiated=False),
                )
            ),
            2 * MiB,
            "not instantiated",
        ),
        (
            Layout.plain(MiB, (22, 8, 4)).__class__((Component(0, EOF, MiB, 24, (22, 8, 4)),)),
            3 * MiB,
            "lists only 3 of 24 OSTs",
        ),
        (CSC, -1, "negative"),
        (
            Layout((Component(0, MiB, MiB, 1, (0,)), Component(2 * MiB, EOF, MiB, 1, (1,)))),
            0,
            "without gaps",
        ),
        (Layout((Component(0, EOF, 0, 1, (0,)),)), 0, "positive number of bytes"),
    ],
)
def test_no_place_is_a_clear_error(layout, offset, message):
    with pytest.raises(LabError, match=message):
        locate(layout, offset)


def test_truncated_csc_listing_still_answers_its_first_rows():
    printed = Layout((Component(0, EOF, MiB, 24, (22, 8, 4)),))
    assert [locate(printed, k * MiB).ost for k in range(3)] == [22, 8, 4]


def _random_range(rng: random.Random, layout: Layout) -> tuple[int, int]:
    top = 80 * MiB if layout is MANUAL_PFL else 6 * MiB
    start = rng.randrange(0, top)
    return start, rng.randrange(1, min(3 * MiB, top))


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_round_trip_through_the_objects(name):
    """Scatter a range's bytes into per-object buffers, read every byte back through locate()."""
    layout = LAYOUTS[name]
    for seed in range(4):
        rng = random.Random(seed)
        start, length = _random_range(rng, layout)
        data = rng.randbytes(length)
        objects: dict[tuple[int, int], bytearray] = {}
        seen = 0
        for piece in pieces(layout, start, length):
            buf = objects.setdefault((piece.component_index, piece.stripe_index), bytearray())
            end = piece.object_offset + piece.length
            buf.extend(b"\0" * max(0, end - len(buf)))
            chunk = data[piece.file_offset - start : piece.file_offset - start + piece.length]
            buf[piece.object_offset : end] = chunk
            seen += piece.length
        assert seen == length
        probes = rng.sample(range(length), min(length, 3000)) + [0, length - 1]
        for i in probes:
            place = locate(layout, start + i)
            assert (
                objects[(place.component_index, place.stripe_index)][place.object_offset] == data[i]
            )


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_each_byte_has_exactly_one_place(name):
    """Injective over a range, and the pieces tile it with no gap or overlap."""
    layout = LAYOUTS[name]
    start, length = 3 * KiB + 11, 2 * MiB + 777
    step = 97  # a stride coprime to every stripe size keeps this quick and still covers units
    places = {tuple(locate(layout, off)) for off in range(start, start + length, step)}
    assert len(places) == len(range(start, start + length, step))
    runs = list(pieces(layout, start, length))
    assert runs[0].file_offset == start
    assert all(a.file_offset + a.length == b.file_offset for a, b in pairwise(runs))
    assert sum(r.length for r in runs) == length
    assert sum(bytes_per_ost(layout, start, length).values()) == length


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_objects_fill_without_holes_after_their_first_byte(name):
    """Per object, the offsets written from file offset 0 form one interval
    [leading hole, leading hole + data bytes): a bijection onto the object's data."""
    layout = LAYOUTS[name]
    size = 70 * MiB if layout is MANUAL_PFL else 5 * MiB + 3
    extents = object_extents(layout, size)
    assert extents["data_bytes"].sum() == size
    spans: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for piece in pieces(layout, 0, size):
        spans.setdefault((piece.component_index, piece.stripe_index), []).append(
            (piece.object_offset, piece.object_offset + piece.length)
        )
    for row in extents.itertuples():
        runs = sorted(spans[(row.component_index, row.stripe_index)])
        assert all(a_end == b_start for (_, a_end), (b_start, _) in pairwise(runs))
        assert (runs[0][0], runs[-1][1]) == (row.leading_hole_bytes, row.object_end_bytes)
        assert row.object_end_bytes - row.leading_hole_bytes == row.data_bytes
    if layout in (PLAIN4, CSC, OVERSTRIPED):
        assert (extents["leading_hole_bytes"] == 0).all()


def test_pfl_objects_begin_with_a_hole():
    extents = object_extents(MANUAL_PFL, 128 * MiB).set_index(["component_index", "stripe_index"])
    assert extents.loc[(0, 0), "leading_hole_bytes"] == 0
    assert extents.loc[(1, 0), "leading_hole_bytes"] == MiB
    assert extents.loc[(1, 0), "data_bytes"] == 15 * MiB
    assert extents.loc[(2, 7), "leading_hole_bytes"] == 8 * MiB
    assert extents.loc[(2, 7), "data_bytes"] == 8 * MiB


def test_aligned_blocks_touch_exactly_one_ost():
    rng = random.Random(5)
    for layout in (PLAIN4, CSC, MANUAL_PFL):
        for _ in range(200):
            offset = rng.randrange(0, 90 * MiB)
            comp = next(c for c in layout.components if c.end is EOF or offset < c.end)
            unit = offset // comp.stripe_size * comp.stripe_size
            length = rng.randrange(1, comp.stripe_size + 1)
            assert is_aligned(unit, length, comp.stripe_size)
            assert len(osts_touched(layout, unit, length)) == 1
    assert not is_aligned(MiB - 1, 2, MiB)
    assert osts_touched(CSC, MiB // 2, 3 * MiB) == [22, 8, 4, 100]


def test_writer_blocks_patterns():
    assert list(writer_blocks(2, 10, 3, pattern=SEGMENTED)) == [
        (0, 0, 10),
        (0, 10, 10),
        (0, 20, 10),
        (1, 30, 10),
        (1, 40, 10),
        (1, 50, 10),
    ]
    assert list(writer_blocks(2, 10, 3, start=5, pattern=INTERLEAVED)) == [
        (0, 5, 10),
        (0, 25, 10),
        (0, 45, 10),
        (1, 15, 10),
        (1, 35, 10),
        (1, 55, 10),
    ]
    with pytest.raises(LabError, match="unknown access pattern"):
        list(writer_blocks(2, 10, pattern="random"))
    with pytest.raises(LabError, match="must be positive"):
        list(writer_blocks(0, 10))


def test_sixteen_writers_aligned_versus_200000_byte_records():
    layout = Layout.plain(MiB, range(8))
    aligned = grid_summary(writer_ost_grid(layout, 16, MiB))
    assert aligned == {
        "writers_count": 16,
        "osts_used_count": 8,
        "osts_per_writer_max": 1,
        "osts_per_writer_mean": 1.0,
        "writers_per_ost_max": 2,
        "writers_per_ost_mean": 2.0,
        "writers_on_one_ost_count": 16,
    }
    interleaved = grid_summary(writer_ost_grid(layout, 16, MiB, 4, pattern=INTERLEAVED))
    assert interleaved["osts_per_writer_max"] == 1
    assert interleaved["writers_per_ost_max"] == 2
    # 16 x 200 000 bytes = 3.2 MB over 4 stripe units; writers 5, 10 and 15 straddle a
    # boundary (1 048 576, 2 097 152, 3 145 728), units 0-2 each serve 6 writers, unit 3 one.
    grid = writer_ost_grid(layout, 16, 200_000)
    unaligned = grid_summary(grid)
    assert unaligned == {
        "writers_count": 16,
        "osts_used_count": 4,
        "osts_per_writer_max": 2,
        "osts_per_writer_mean": 1.188,
        "writers_per_ost_max": 6,
        "writers_per_ost_mean": 4.75,
        "writers_on_one_ost_count": 13,
    }
    writer5 = grid[grid["writer"] == 5].set_index("ost")["data_bytes"].to_dict()
    assert writer5 == {0: 1_048_576 - 1_000_000, 1: 1_200_000 - 1_048_576}
    assert grid["data_bytes"].sum() == 16 * 200_000


def test_sqrt_rule_and_factor_rule_from_csc():
    assert stripe_count_sqrt_rule(90 * GB).stripe_count == 9
    assert "9.49" in stripe_count_sqrt_rule(90 * GB).reason
    assert stripe_count_sqrt_rule(10**6).stripe_count == 1
    assert factor_of_writers(9, 16).stripe_count == 16
    assert factor_of_writers(3, 16).stripe_count == 4
    assert factor_of_writers(4, 16).stripe_count == 4
    assert factor_of_writers(40, 16).stripe_count == 16
    assert factor_of_writers(5, 12).stripe_count == 6
    assert "CSC" in factor_of_writers(9, 16).source


def test_advise_stripe_count():
    advice = advise_stripe_count(90 * GB, 16)
    assert advice.stripe_count == 16
    assert "at least 9" in advice.reason and "CSC" in advice.source
    assert advise_stripe_count(90 * GB, 16, osts_available=12).stripe_count == 8
    assert advise_stripe_count(90 * GB, 16, file_per_process=True).stripe_count == 1
    assert advise_stripe_count(500 * KiB, 64).stripe_count == 1
    assert advise_stripe_count(500 * KiB, 64).source.startswith("Lustre wiki")
    assert advise_stripe_count(4 * GB, 6).stripe_count == 2
    with pytest.raises(LabError, match="at least 1"):
        advise_stripe_count(GB, 0)
    with pytest.raises(LabError, match="negative"):
        advise_stripe_count(-1, 4)


def test_nersc_and_wiki_and_the_table():
    assert [nersc_stripe_helper(s * GB).stripe_count for s in (0.5, 5, 50, 200)] == [1, 8, 24, 72]
    assert lustre_wiki_range(100 * KiB) == (1, 1)
    assert lustre_wiki_range(GiB := 1024**3) == (1, 4)
    assert lustre_wiki_range(2 * GiB, 1) == (4, 8)
    assert lustre_wiki_range(2 * GiB, 16) == (8, -1)
    table = advice_table([5 * GB, 90 * GB, 600 * GB], 16)
    assert table["csc_factor_count"].tolist() == [2, 16, 16]
    assert table["nersc_count"].tolist() == [8, 24, 72]
    assert table["olcf_manual_striping"].tolist() == [False, False, True]


@pytest.mark.usefixtures("login_node")
def test_trial_plan_is_data(tmp_path: Path):
    plan = plan_trial(tmp_path, (8, 4, 1, 2), size_mib=64, osts_available=4)
    assert [s.stripe_count for s in plan] == [1, 2, 4]
    assert plan[2].commands() == [
        f"mkdir {tmp_path}/count4",
        f"lfs setstripe -c 4 -S 1048576 {tmp_path}/count4",
        f"dd if=/dev/zero of={tmp_path}/count4/data.bin bs=1M count=64 conv=fdatasync",
        f"lfs getstripe {tmp_path}/count4/data.bin",
    ]
    assert plan_frame(plan)["stripe_count"].tolist() == [1, 2, 4]
    with pytest.raises(LabError, match="multiple of 64 KiB"):
        plan_trial(tmp_path, stripe_size_bytes=100_000)
    with pytest.raises(LabError, match="none of the stripe counts"):
        plan_trial(tmp_path, (8,), osts_available=4)
    with pytest.raises(LabError, match="too big for a shared login node"):
        plan_trial(tmp_path, size_mib=4096)


def test_layout_problems_compares_request_and_model(tmp_path: Path):
    step = TrialStep(4, MiB, 8, tmp_path / "d", tmp_path / "d" / "f")
    assert layout_problems(Layout.plain(MiB, (6, 1, 19, 15)), step) == []
    assert layout_problems(Layout.plain(MiB, (6, 1)), step) == ["stripe count 2, asked for 4"]
    assert "stripe size 4194304" in layout_problems(Layout.plain(4 * MiB, (6, 1, 19, 15)), step)[0]
    assert "components" in layout_problems(MANUAL_PFL, step)[0]


def test_pictures_draw_every_stripe_unit():
    ax = stripes_by_ost(MANUAL_PFL, 80 * MiB)
    assert len(ax.patches) == 80
    assert len(ax.get_legend().get_texts()) == 8
    assert sum(1 for line in ax.get_lines() if line.get_linestyle() == "--") == 2
    layout = Layout.plain(MiB, range(8))
    fig = grid_pair(
        writer_ost_grid(layout, 16, MiB),
        writer_ost_grid(layout, 16, 200_000),
        "aligned",
        "unaligned",
    )
    assert fig.axes[0].images[0].get_array().shape == (16, 8)
    assert fig.axes[1].images[0].get_array().shape == (16, 4)


def test_architecture_script_writes_a_figure(tmp_path: Path, capsys):
    from iolab.hpc.stripe_plots import main

    assert main([str(tmp_path / "arch.svg")]) == 0
    assert (tmp_path / "arch.svg").read_text().lstrip().startswith("<?xml")
    assert "wrote" in capsys.readouterr().out


def test_placeholders_parse_but_have_no_place():
    """A self-extending placeholder (stripe size 0) and a default with count -1 are valid
    layouts; only a byte that falls in them has no place yet."""
    sel = Layout(
        (
            Component(0, 64 * MiB, 4 * MiB, 2, (0, 1)),
            Component(64 * MiB, 128 * MiB, 0, 0, (), instantiated=False),
            Component(128 * MiB, EOF, 8 * MiB, 2, (), instantiated=False),
        ),
        composite=True,
    )
    assert locate(sel, 64 * MiB - 1) == (1, 32 * MiB - 1, 0, 1)
    with pytest.raises(LabError, match="component 1 .* not instantiated"):
        locate(sel, 64 * MiB)
    default = Layout((Component(0, EOF, MiB, -1, (), instantiated=False),))
    with pytest.raises(LabError, match="not instantiated"):
        locate(default, 0)


def test_committed_architecture_figure_is_current(tmp_path: Path):
    """The lesson's SVG is what the code draws; after changing the figure, regenerate it with
    `python -m iolab.hpc.stripe_plots lessons/img/lustre-architecture.svg`."""
    from iolab.hpc.stripe_plots import main

    main([str(tmp_path / "arch.svg")])
    drawn = (tmp_path / "arch.svg").read_text(encoding="utf-8")
    committed = (
        Path(__file__).resolve().parent.parent / "lessons/img/lustre-architecture.svg"
    ).read_text(encoding="utf-8")
    texts = lambda svg: re.findall(r"<text[^>]*>([^<]*)</text>", svg)  # noqa: E731
    assert texts(drawn) and texts(drawn) == texts(committed)
    if f"Matplotlib v{matplotlib.__version__}," in committed:  # same drawing code: same bytes
        assert drawn == committed


def test_trial_directory_is_removed_also_on_error(workspace: Path):
    from iolab.hpc.stripe_trial import lustre_location, run_trial, trial_directory
    from iolab.storage.locations import discover_locations

    workspace.mkdir()
    location = next(loc for loc in discover_locations(probe=False) if loc.name == "workspace")
    with trial_directory(location, MiB, 2) as base:
        (base / "f").write_bytes(b"x")
        assert (workspace / "tmp") in base.parents
    assert not base.exists()
    with pytest.raises(LabError, match="not enough free space"):
        with trial_directory(location, 10**18, 2) as base:
            pass
    assert [p.name for p in (workspace / "tmp").iterdir()] == [MADE_MARKER]
    assert lustre_location() is None or lustre_location().fs_type == "lustre"
    if location.fs_type != "lustre":
        with pytest.raises(LabError, match="not .*Lustre"):
            run_trial(location)
        assert [p.name for p in (workspace / "tmp").iterdir()] == [MADE_MARKER]
