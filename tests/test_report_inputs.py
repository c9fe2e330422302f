"""What `report` reads and writes: `--log` as bounded as `--from`, regular files only, and an
`--out` folder whose symlinks are replaced, never followed."""

from __future__ import annotations

import contextlib
import io
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import toolstop.report.sources._base as base
from toolstop.cli import main
from toolstop.report.reader import log_run_ends


def run_end(run: int, thread: str = "t1", padding: str = "") -> str:
    record = {"run": run, "rule": "none", "mode": "never", "model_calls": 1, "tools": []}
    entry = {"event": "run_end", "thread_id": thread, "record": record, "note": padding}
    return json.dumps(entry) + "\n"


def report(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["report", *argv])
    return code, capsys.readouterr().err


class Watched(io.BytesIO):
    """A byte stream that remembers the longest piece any read returned."""

    longest = 0

    def readline(self, size: int | None = -1) -> bytes:
        line = super().readline(size)
        self.longest = max(self.longest, len(line))
        return line


def test_a_log_line_over_the_cap_is_skipped_without_holding_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(base, "MAX_LINE_BYTES", 200)
    monkeypatch.setattr(base, "_PIECE", 7)
    long = run_end(1, padding="x" * 5000)
    stream = Watched((long + run_end(2) + "\n" + run_end(3)).encode())
    skipped = [0]
    ends = list(log_run_ends(stream, skipped=skipped))
    assert [end.record["run"] for end in ends] == [2, 3]
    assert skipped == [1]
    assert stream.longest <= 200 + 1  # the long line was never read whole


def test_deep_json_and_bad_bytes_in_a_log_are_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.jsonl"
    deep = "[" * 200_000 + "]" * 200_000
    log.write_bytes(
        (deep + "\n" + run_end(1) + "\xff\xfe\n").encode("latin-1") + run_end(2).encode()
    )
    code, err = report("--log", str(log), "--out", str(tmp_path / "out"), capsys=capsys)
    assert code == 0, err
    document = json.loads((tmp_path / "out" / "report.json").read_text())
    assert document["runs"] == 2
    assert document["skipped_lines"] == 2
    assert "2 line(s)" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("option", ["--log", "--from"])
def test_a_fifo_is_refused_without_waiting_for_a_writer(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code, err = returns(
        lambda: report(option, str(fifo), "--out", str(tmp_path / "out"), capsys=capsys),
        unblock=fifo,
    )
    assert code == 2
    assert f"cannot read {fifo}: not a regular file" in err
    assert not (tmp_path / "out").exists()


def returns(call: Callable[[], Any], unblock: Path) -> Any:
    """`call()` run in a thread with a hang guard: a call blocked opening the FIFO `unblock`
    (which would hang the test) is released by opening its other end, and fails the test."""
    found: list[Any] = []
    thread = threading.Thread(target=lambda: found.append(call()), daemon=True)
    thread.start()
    thread.join(_HANG_GUARD)
    blocked = thread.is_alive()
    while blocked and thread.is_alive():  # each open for reading waits for a writer: let go
        with contextlib.suppress(OSError):
            os.close(os.open(unblock, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(1)
    assert not blocked, "the call blocked opening the FIFO"
    return found[0]


_HANG_GUARD = 30  # seconds: never reached by a call that does not block


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize(
    "extra",
    [[], ["--format", "openai"], ["--format", "langsmith"], ["--template", "search"]],
)
def test_a_fifo_from_is_refused_before_anything_opens_it(
    extra: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    argv = ["report", "--from", str(fifo), *extra, "--out", str(tmp_path / "out")]
    code = returns(lambda: main(argv), unblock=fifo)
    assert code == 2
    assert f"cannot read {fifo}: not a regular file" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("option", ["--log", "--from"])
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_device_is_refused(
    option: str, device: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not Path(device).exists():
        pytest.skip(f"no {device} here")
    code, err = report(option, device, "--out", str(tmp_path / "out"), capsys=capsys)
    assert code == 2
    assert f"cannot read {device}: not a regular file" in err


def test_a_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = report("--from", str(tmp_path), "--out", str(tmp_path / "out"), capsys=capsys)
    assert code == 2
    assert "not a regular file" in err


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """A log of one finished run."""
    path = tmp_path / "log.jsonl"
    path.write_text(run_end(1))
    return path


def test_a_symlink_to_a_regular_log_is_read(
    tmp_path: Path, log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = tmp_path / "link.jsonl"
    link.symlink_to(log)
    code, err = report("--log", str(link), "--out", str(tmp_path / "out"), capsys=capsys)
    assert code == 0, err


def test_out_replaces_a_symlink_and_leaves_its_target(
    tmp_path: Path, log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    victims: dict[str, Any] = {}
    for name in ("report.json", "report.html", "chart.png"):
        victim = tmp_path / f"precious-{name}"
        victim.write_text("keep me")
        (out / name).symlink_to(victim)
        victims[name] = victim
    code, err = report("--log", str(log), "--out", str(out), capsys=capsys)
    assert code == 0, err
    for name, victim in victims.items():
        assert victim.read_text() == "keep me"
        if name == "chart.png" and (out / name).is_symlink():  # no matplotlib: no chart
            continue
        assert not (out / name).is_symlink()
        assert (out / name).stat().st_mode & 0o777 == 0o644
    assert json.loads((out / "report.json").read_text())["runs"] == 1
    assert sorted(p.name for p in out.iterdir()) == ["chart.png", "report.html", "report.json"]


def test_the_limits_table_quotes_the_constants() -> None:
    """docs/security.md's table of limits says what the code's constants are."""
    from toolstop.cli.report import THREADS_COUNTED
    from toolstop.report.records import LIMIT, NAME_LIMIT
    from toolstop.report.tally import INNER, SHOWN, TRACKED

    page = (Path(__file__).parents[1] / "docs" / "security.md").read_text(encoding="utf-8")
    table = page.split("## Limits, command by command", 1)[1].split("\n## ", 1)[0]
    assert f"at most {base.MAX_LINE_BYTES // 2**20} MiB is read at once" in table
    assert f"drained in {base._PIECE // 2**20} MiB pieces" in table
    assert f"cut to {NAME_LIMIT} characters" in table
    assert f"{TRACKED:,} counted one by one, {SHOWN} shown" in table
    assert f"{INNER} inner keys" in table
    assert f"cut to {NAME_LIMIT} characters; {SHOWN} shown" in table
    assert f"above 10^{len(str(LIMIT)) - 1}" in table
    assert 10 ** (len(str(LIMIT)) - 1) == LIMIT
    assert f"exactly up to {THREADS_COUNTED:,}" in table
    from toolstop.report.from_logs import MAX_OPEN_THREADS, THREAD_LIMITS
    from toolstop.report.sources import parquet
    from toolstop.report.sources._traces import TraceLimits
    from toolstop.report.sources.langsmith import MAX_TOOLS

    assert parquet._DECODED_BYTES == base.MAX_LINE_BYTES == 64 * 2**20
    assert "a value over 64 MiB or a row over 64 MiB decoded" in table
    assert f"a row group over {parquet._ROW_GROUP_BYTES // 2**30} GiB uncompressed" in table
    limits = TraceLimits()
    assert f"{limits.records:,} kept records or {limits.bytes // 2**20} Mi characters" in table
    assert f"cut to {MAX_TOOLS:,}" in table
    messages, size = THREAD_LIMITS
    assert f"{messages:,} messages or {size // 2**20} Mi characters per open thread" in table
    assert f"{MAX_OPEN_THREADS:,} threads open" in table
