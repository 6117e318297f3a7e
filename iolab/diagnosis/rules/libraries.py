"""HDF5 and PnetCDF, the libraries above MPI-IO: a file whose library calls took a large share
of the run, mostly above the MPI-IO (or POSIX) calls they made, spent its time in the library
itself (chunking, metadata, datatype conversion, waiting for other ranks), which no finding
about the layers beneath explains."""

from __future__ import annotations

from iolab.diagnosis.facts import Run
from iolab.diagnosis.rules.base import (
    MAJOR_SHARE,
    TOP_FILES,
    Finding,
    busiest_rank_seconds,
    charged,
    layer_records,
    share_of,
)

#: Each library's Darshan modules: the file's record and its datasets' or variables'
#: (named "<file>:<dataset>").
LIBRARY_LAYERS = {"HDF5": ("H5F", "H5D"), "PnetCDF": ("PNETCDF_FILE", "PNETCDF_VAR")}
#: The modules whose records are named "<file>:<name>".
NAMED_PARTS = ("H5D", "PNETCDF_VAR")
#: The lab's own, as for collective-mpiio-time: a library's calls on a file worth at least
#: MAJOR_SHARE of the run on the slowest rank, at least this share of it above the seconds
#: of the layer it calls (MPI-IO, or POSIX where the file has no MPI-IO record).
LIBRARY_ABOVE_SHARE = 0.5
#: What to change where the library's own work costs most.
LIBRARY_FIX = {
    "HDF5": "the time went inside HDF5, above the file system: chunks that match how the "
    "ranks access the data (H5Pset_chunk) and a chunk cache that holds them "
    "(H5Pset_chunk_cache), metadata done by the ranks together "
    "(H5Pset_all_coll_metadata_ops, H5Pset_coll_metadata_write), collective transfers "
    "(H5Pset_dxpl_mpio), and the same datatype in memory as in the file (no conversion)",
    "PnetCDF": "the time went inside PnetCDF, above the file system: post many small "
    "requests as nonblocking calls (ncmpi_iput_vara, ncmpi_iget_vara) completed together by "
    "one ncmpi_wait_all, define every variable before the first write (a header that grows "
    "in ncmpi_redef moves the data behind it), and set the nc_header_align_size and "
    "nc_var_align_size hints to the file system's block",
}


def library_time(run: Run) -> list[Finding]:
    """Per library, the file whose calls cost most above the layer beneath, when that is a
    large share of the run: the slowest rank's seconds in the library's calls on the file
    (the file's record and its datasets' or variables') less the slowest rank's seconds in
    the calls beneath on the same file."""
    if run.run_time_s <= 0:
        return []
    data = run.data()
    found = []
    for library, layers in LIBRARY_LAYERS.items():
        mine = data[data.layer.isin(layers)]
        if mine.empty:
            continue
        files = mine.path.str.rsplit(":", n=1).str[0].where(mine.layer.isin(NAMED_PARTS), mine.path)
        rows = []
        for path, part in mine.groupby(files):
            part = part.copy()
            part.attrs["processes"] = run.processes
            seconds = (part.read_time_s + part.write_time_s + part.meta_time_s).fillna(0.0)
            spent = busiest_rank_seconds(part, seconds)
            below_layer = "MPI-IO" if (run.data("MPI-IO").path == path).any() else "POSIX"
            below = layer_records(run, below_layer)
            below = below[below.path == path]
            beneath = busiest_rank_seconds(
                below, (below.read_time_s + below.write_time_s + below.meta_time_s).fillna(0.0)
            )
            rows.append((str(path), spent, beneath, below_layer, part))
        big = [
            row
            for row in rows
            if row[1] >= MAJOR_SHARE * run.run_time_s
            and row[1] - row[2] >= LIBRARY_ABOVE_SHARE * row[1]
        ]
        if not big:
            continue
        path, spent, beneath, below_layer, part = max(big, key=lambda row: row[1] - row[2])
        above = spent - beneath
        _, held = charged(
            part,
            read=part.read_time_s.fillna(0.0),
            write=part.write_time_s.fillna(0.0),
            meta=part.meta_time_s.fillna(0.0),
        )
        found.append(
            Finding(
                "library-time",
                f"{library} calls costing most above {below_layer}",
                above,
                f"{library} calls on {path} took {spent:,.1f} s on its slowest rank "
                f"({share_of(spent, run.run_time_s):.0%} of the run), the {below_layer} calls "
                f"beneath them at most {beneath:,.1f} s on any rank: {above:,.1f} s (the "
                f"cost: the library's slowest rank less {below_layer}'s) went to the library "
                "itself, not to the file system"
                + (f" ({len(big)} files like this)" if len(big) > 1 else ""),
                LIBRARY_FIX[library],
                files=[row[0] for row in sorted(big, key=lambda row: row[2] - row[1])][:TOP_FILES],
                counters={
                    f"{'H5D_F_* + H5F_F_*' if library == 'HDF5' else 'PNETCDF_*_F_*'} seconds "
                    "of the slowest rank": spent,
                    f"{below_layer} seconds of the slowest rank": beneath,
                },
                cost_formula=f"the file's slowest rank's seconds in {library} calls less the "
                f"slowest rank's in the {below_layer} calls beneath",
                claims=held * share_of(above, spent),
            )
        )
    return found
