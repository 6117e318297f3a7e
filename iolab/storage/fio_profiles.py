"""The named fio profiles (login, node, pairs, evaluation): their jobs and options, as the job
files demos/fio/NAME.fio write them. Apart from running them (iolab.storage.fio, which needs
pandas), so that checking `python -m iolab fio --profile` imports no heavy package.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Job options that ask to yield the disk and the CPU to everyone else (idle I/O class,
#: nice 19); the I/O class is honoured only by some schedulers (see iolab.storage.fio).
GENTLE_OPTIONS = {"prioclass": "3", "nice": "19"}


@dataclass(frozen=True)
class FioJob:
    """One fio job: its name and its own options, as a job-file section writes them.

    Option values are strings; a flag (stonewall, time_based) has the value "".
    """

    name: str
    options: dict[str, str]


@dataclass(frozen=True)
class Profile:
    """A named set of fio jobs: options shared by all ([global]) and the jobs in order.

    `login_sized` profiles must fit the login limits on any node; the others only where no
    batch job shows that this is a compute node.
    """

    name: str
    purpose: str
    global_options: dict[str, str]
    jobs: tuple[FioJob, ...]
    login_sized: bool = False

    def options(self, job: FioJob) -> dict[str, str]:
        """The job's effective options: its own over the global ones."""
        return {**self.global_options, **job.options}


def _job(name: str, **options: str | int) -> FioJob:
    return FioJob(name, {key: str(value) for key, value in options.items()})


_TIMED = {"time_based": ""}
PROFILES: dict[str, Profile] = {
    "login": Profile(
        "login",
        "a short scan a shared login node can afford (256 MiB, at most 20 s per job)",
        {
            "ioengine": "libaio",
            "filename": "iolab-fio-login.dat",
            "size": "256m",
            "overwrite": "1",
            "runtime": "20",
            "stonewall": "",
            **GENTLE_OPTIONS,
        },
        (
            _job("seq-write-1m-buffered", rw="write", bs="1m", direct=0, end_fsync=1),
            _job("seq-write-1m-direct", rw="write", bs="1m", direct=1, iodepth=16),
            _job("seq-read-1m-buffered", rw="read", bs="1m", direct=0),
            _job("seq-read-1m-direct", rw="read", bs="1m", direct=1, iodepth=16),
            _job(
                "rand-read-4k-qd1", rw="randread", bs="4k", direct=1, iodepth=1, runtime=5, **_TIMED
            ),
            _job(
                "rand-read-4k-qd16",
                rw="randread",
                bs="4k",
                direct=1,
                iodepth=16,
                runtime=5,
                **_TIMED,
            ),
            _job(
                "rand-read-4k-qd1-4jobs",
                rw="randread",
                bs="4k",
                direct=1,
                iodepth=1,
                numjobs=4,
                group_reporting=1,
                runtime=5,
                **_TIMED,
            ),
            _job(
                "rand-write-4k-qd1",
                rw="randwrite",
                bs="4k",
                direct=1,
                iodepth=1,
                runtime=5,
                **_TIMED,
            ),
            _job(
                "rand-write-4k-qd16",
                rw="randwrite",
                bs="4k",
                direct=1,
                iodepth=16,
                runtime=5,
                **_TIMED,
            ),
        ),
        login_sized=True,
    ),
    "node": Profile(
        "node",
        "stas00's fio-scan for a compute node (16 processes at depth 64, 3 min per job)",
        {
            "ioengine": "libaio",
            "bs": "4k",
            "iodepth": "64",
            "numjobs": "16",
            "direct": "1",
            "ramp_time": "2",
            "runtime": "180",
            "verify": "0",
            "randrepeat": "0",
            "group_reporting": "1",
            "unlink": "1",
            "stonewall": "",
            **_TIMED,
        },
        tuple(
            _job(f"{rw}-{size}", rw=rw, filesize=size)
            for size in ("16k", "1m", "1g")
            for rw in ("read", "write")
        ),
    ),
    "pairs": Profile(
        "pairs",
        "fs-performance-container's latency/throughput pairs (500 MiB file, 2 min per job)",
        {
            "ioengine": "libaio",
            "filename": "iolab-fio-pairs.dat",
            "filesize": "500m",
            "overwrite": "1",
            "direct": "1",
            "runtime": "120",
            "stonewall": "",
            **_TIMED,
        },
        (
            _job("sw1m@qd32", rw="write", bs="1m", iodepth=32),
            _job("sr1m@qd32", rw="read", bs="1m", iodepth=32),
            _job("rw4k@qd1", rw="randwrite", bs="4k", iodepth=1),
            _job("rr4k@qd1", rw="randread", bs="4k", iodepth=1),
            _job("rw4k@qd32", rw="randwrite", bs="4k", iodepth=32),
            _job("rr4k@qd32", rw="randread", bs="4k", iodepth=32),
        ),
    ),
    "evaluation": Profile(
        "evaluation",
        "the NERC storage evaluation's five benchmarks, login-sized (512 MiB, 10 s per job)",
        {
            "ioengine": "libaio",
            "filename": "iolab-fio-evaluation.dat",
            "size": "512m",
            "overwrite": "1",
            "direct": "1",
            "runtime": "10",
            "stonewall": "",
            **_TIMED,
        },
        (
            _job("streaming-write", rw="write", bs="1m", iodepth=32),
            _job("streaming-read", rw="read", bs="1m", iodepth=32),
            _job("max-latency-write", rw="randwrite", bs="4k", iodepth=1),
            _job("max-latency-read", rw="randread", bs="4k", iodepth=1),
            _job("min-latency-write", rw="write", bs="4k", iodepth=1),
            _job("min-latency-read", rw="read", bs="4k", iodepth=1),
            _job("max-random-write", rw="randwrite", bs="4k", iodepth=32),
            _job("max-random-read", rw="randread", bs="4k", iodepth=32),
            _job("small-wss-read", rw="read", bs="1m", iodepth=32, size="64m"),
        ),
    ),
}
