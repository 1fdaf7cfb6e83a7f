"""The wheel and sdist: they build without warnings, pass ``twine check --strict``, carry the
metadata PyPI shows (with classifiers PyPI accepts), and hold every file the package needs at
run time."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email.message import Message
from email.parser import Parser

from duetime import __version__
from tests.packaging.conftest import ROOT, Dists, require_tool

PACKAGE = ROOT / "src" / "duetime"


def package_files() -> set[str]:
    """Every file of src/duetime a user's install needs, as wheel paths (``duetime/...``)."""
    return {
        path.relative_to(PACKAGE.parent).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def wheel_names(dists: Dists) -> set[str]:
    with zipfile.ZipFile(dists.wheel) as wheel:
        return set(wheel.namelist())


def wheel_metadata(dists: Dists) -> Message:
    with zipfile.ZipFile(dists.wheel) as wheel:
        text = wheel.read(f"duetime-{__version__}.dist-info/METADATA").decode()
    return Parser().parsestr(text)


def setuptools_warnings(log: str) -> list[str]:
    """The lines of a build log where setuptools complains about our configuration.

    setuptools frames its configuration and deprecation warnings in ``!!`` banners and prints
    distutils-style ``warning:`` lines (missing manifest files…); its note that byte-compiling
    is off is not about us, and pip's own ``WARNING:`` lines (network retries) are not either.
    """
    return [
        line
        for line in log.splitlines()
        if line.strip() == "!!"
        or "deprecat" in line.lower()
        or (line.startswith("warning:") and "byte-compiling is disabled" not in line)
    ]


def test_the_build_warns_of_nothing_in_our_configuration(dists: Dists) -> None:
    assert setuptools_warnings(dists.log) == []


def test_twine_check_strict_passes(dists: Dists) -> None:
    require_tool("twine")
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(dists.wheel), str(dists.sdist)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_wheel_holds_every_package_file(dists: Dists) -> None:
    names = wheel_names(dists)
    assert package_files() - names == set()
    assert "duetime/py.typed" in names
    for store in ("postgres", "sqlite"):
        assert any(n.startswith(f"duetime/store/{store}/queries/") for n in names)
        assert any(n.startswith(f"duetime/store/{store}/migrations/") for n in names)
    assert {"duetime/dashboard/index.html", "duetime/dashboard/app.js"} <= names


def test_the_wheel_holds_nothing_but_the_package(dists: Dists) -> None:
    top = {name.split("/", 1)[0] for name in wheel_names(dists)}
    assert top == {"duetime", f"duetime-{__version__}.dist-info"}
    assert not [n for n in wheel_names(dists) if "__pycache__" in n or n.endswith(".pyc")]


def test_the_wheel_declares_the_duetime_command(dists: Dists) -> None:
    with zipfile.ZipFile(dists.wheel) as wheel:
        entry_points = wheel.read(f"duetime-{__version__}.dist-info/entry_points.txt").decode()
    assert "duetime = duetime.cli:main" in entry_points


def test_the_metadata_is_what_pypi_shows(dists: Dists) -> None:
    meta = wheel_metadata(dists)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["Name"] == "duetime"
    assert meta["Version"] == __version__ == project["version"]
    assert meta["Summary"] == project["description"]
    assert meta["Description-Content-Type"] == "text/markdown"
    assert meta.get_payload().strip() == (ROOT / "README.md").read_text().strip()
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["Requires-Python"] == ">=3.11"
    classifiers = meta.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    # A license classifier beside License-Expression is refused by PyPI (PEP 639).
    assert not [c for c in classifiers if c.startswith("License ::")]
    requires = meta.get_all("Requires-Dist") or []
    assert {r for r in requires if "extra ==" not in r} == set(project["dependencies"])


def test_every_classifier_is_one_pypi_accepts(dists: Dists) -> None:
    require_tool("trove_classifiers")
    from trove_classifiers import classifiers as known
    from trove_classifiers import deprecated_classifiers

    declared = wheel_metadata(dists).get_all("Classifier") or []
    assert declared
    assert [c for c in declared if c not in known or c in deprecated_classifiers] == []


def test_the_license_text_ships_in_both(dists: Dists) -> None:
    license_text = (ROOT / "LICENSE").read_text()
    with zipfile.ZipFile(dists.wheel) as wheel:
        assert wheel.read(f"duetime-{__version__}.dist-info/licenses/LICENSE").decode() == (
            license_text
        )
    with tarfile.open(dists.sdist) as sdist:
        member = sdist.extractfile(f"duetime-{__version__}/LICENSE")
        assert member is not None
        assert member.read().decode() == license_text


def test_the_sdist_holds_the_sources_and_the_data(dists: Dists) -> None:
    root = f"duetime-{__version__}/"
    with tarfile.open(dists.sdist) as sdist:
        names = {m.name.removeprefix(root) for m in sdist.getmembers() if m.isfile()}
    assert {f"src/{name}" for name in package_files()} - names == set()
    assert {"pyproject.toml", "README.md", "LICENSE"} <= names
