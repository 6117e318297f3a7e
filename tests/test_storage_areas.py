"""The one table of storage areas (iolab.core.storage_areas) and every list read from it.

Discovery, the advice, the class preflight, a class's workspace and `clean` each need the
storage areas. These tests fail when an area is added to one of their lists by hand instead
of to the table, and when an area of the table is used nowhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iolab.classmode import preflight
from iolab.classmode.load import class_load
from iolab.core import cleanup
from iolab.core.class_folder import ClassFolder
from iolab.core.storage_areas import STORAGE_AREAS
from iolab.storage import advise
from iolab.storage.locations import discover_locations


@pytest.fixture
def every_area(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Each area's directory in the table's order: a fresh one named after the area for
    every area with a variable (all set), the fixed path for the others."""
    monkeypatch.setenv("IOLAB_WORKDIR", str(tmp_path / "workspace"))  # not made: not listed
    directories = {}
    for area in STORAGE_AREAS:
        if area.variable is None:
            directories[area.name] = Path(str(area.default))
            continue
        directories[area.name] = tmp_path / area.name
        directories[area.name].mkdir()
        monkeypatch.setenv(area.variable, str(directories[area.name]))
    return directories


def test_each_area_is_in_the_table_once_and_can_be_found() -> None:
    for fact in ("name", "variable", "default"):
        values = [getattr(area, fact) for area in STORAGE_AREAS if getattr(area, fact)]
        assert len(values) == len(set(values)), f"two areas share a {fact}"
    assert all(area.variable or area.default for area in STORAGE_AREAS)


def test_discovery_lists_every_area_in_the_tables_order(every_area: dict[str, Path]) -> None:
    found = [(place.name, place.base) for place in discover_locations(probe=False)]
    assert found == [(name, path.resolve()) for name, path in every_area.items() if path.is_dir()]


def test_clean_looks_where_every_area_can_be() -> None:
    assert cleanup.LOCATION_BASES == tuple(area.variable for area in STORAGE_AREAS if area.variable)
    assert cleanup.SYSTEM_BASES == tuple(area.default for area in STORAGE_AREAS if area.default)


def test_the_advice_calls_exactly_the_temporary_areas_temporary() -> None:
    assert advise.TEMPORARY_PLACES == {area.name for area in STORAGE_AREAS if area.temporary}


def test_workspaces_go_to_the_shared_lasting_areas_in_rank_order() -> None:
    ranks = {
        area.name: area.workspace_rank for area in STORAGE_AREAS if area.workspace_rank is not None
    }
    assert preflight.WORKSPACE_PREFERENCE == tuple(sorted(ranks, key=ranks.__getitem__))
    assert len(set(ranks.values())) == len(ranks)
    assert set(ranks) == {area.name for area in STORAGE_AREAS if area.shared and not area.temporary}


def test_the_preflight_judges_room_in_the_ranked_areas_best_first(
    every_area: dict[str, Path],
) -> None:
    checks, _ = preflight.check_places(class_load(1), discover_locations(probe=False))
    assert [check.name for check in checks] == [
        f"room in {name}" for name in preflight.WORKSPACE_PREFERENCE
    ]


def test_a_class_finds_the_area_its_setup_chose(every_area: dict[str, Path]) -> None:
    for area in STORAGE_AREAS:
        joined = ClassFolder(
            root=Path("/class"),
            name="class",
            learners=1,
            slots=1,
            workspaces_in=area.name,
            made_by="teacher",
        )
        expected = every_area["home"] if area.workspace_rank is None else every_area[area.name]
        assert joined.workspace_base() == expected, area.name
