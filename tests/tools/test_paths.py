"""confine: only existing paths inside the allowed roots, after every link and `..` is resolved."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autofe.errors import PathNotAllowed
from autofe.tools.paths import confine


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "app.log").write_text("{}\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    return root


def test_relative_and_absolute_paths_inside_a_root_resolve(root: Path) -> None:
    expected = (root / "logs" / "app.log").resolve()
    assert confine("logs/app.log", [root]) == expected
    assert confine(root / "logs" / "app.log", [root]) == expected
    assert confine(root / "logs" / ".." / "logs" / "app.log", [root]) == expected
    assert confine(root, [root]) == root.resolve()


def test_dotdot_escape_is_refused(root: Path) -> None:
    with pytest.raises(PathNotAllowed, match=r"\.\./secret\.txt: resolves to .*outside") as info:
        confine("../secret.txt", [root])
    assert info.value.roots == (str(root.resolve()),)
    assert str(root.resolve()) in str(info.value)


def test_absolute_path_elsewhere_is_refused(root: Path, tmp_path: Path) -> None:
    with pytest.raises(PathNotAllowed, match="outside the allowed roots"):
        confine(tmp_path / "secret.txt", [root])
    with pytest.raises(PathNotAllowed, match="outside the allowed roots"):
        confine("/etc/passwd", [root])


def test_symlink_pointing_outside_is_refused(root: Path, tmp_path: Path) -> None:
    (root / "logs" / "escape.log").symlink_to(tmp_path / "secret.txt")
    (root / "linkdir").symlink_to(tmp_path)
    with pytest.raises(PathNotAllowed, match=r"escape\.log: resolves to .*secret\.txt"):
        confine("logs/escape.log", [root])
    with pytest.raises(PathNotAllowed, match="outside"):
        confine(root / "linkdir" / "secret.txt", [root])


def test_symlink_staying_inside_is_followed(root: Path) -> None:
    (root / "alias.log").symlink_to(root / "logs" / "app.log")
    assert confine("alias.log", [root]) == (root / "logs" / "app.log").resolve()


def test_missing_file_is_refused(root: Path, tmp_path: Path) -> None:
    with pytest.raises(PathNotAllowed, match=r"nope\.log: no such file; allowed roots: "):
        confine("logs/nope.log", [root])
    (root / "dangling").symlink_to(root / "gone")
    with pytest.raises(PathNotAllowed, match="no such file"):
        confine("dangling", [root])
    # outside a root the answer does not depend on whether the file exists
    with pytest.raises(PathNotAllowed, match="outside"):
        confine(tmp_path / "missing.txt", [root])


def test_any_of_several_roots_will_do(root: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "b.log").write_text("{}\n")
    assert confine("b.log", [root, other]) == (other / "b.log").resolve()
    with pytest.raises(PathNotAllowed, match="no directories are allowed"):
        confine(other / "b.log", [])


def test_a_fifo_or_device_inside_a_root_is_refused(root: Path) -> None:
    """Opening a FIFO waits for a writer: a tool handed one would hang the MCP server."""
    os.mkfifo(root / "logs" / "pipe")
    (root / "null").symlink_to("/dev/null")
    refused = "not a regular file: refused without opening it; allowed roots: "
    with pytest.raises(PathNotAllowed, match=rf"^logs/pipe: is a named pipe \(FIFO\), {refused}"):
        confine("logs/pipe", [root])
    with pytest.raises(PathNotAllowed, match=rf"^null: is a character device, {refused}"):
        confine("null", [Path("/dev"), root])
