#!/usr/bin/env bash
# Build Mnemo for Linux: PyInstaller onedir bundle -> frozen self-test -> release tarball.
#
#   packaging/build_linux.sh [OUT_DIR]        OUT_DIR defaults to dist/ in the repository
#
# Needs a Python where Mnemo (pip install -e .) and PyInstaller (pip install pyinstaller
# pyinstaller-hooks-contrib) are installed: the active venv's `python`, or set PYTHON=...
# PyInstaller's work folder is /tmp/mnemo-pyi-work (or $MNEMO_PYI_WORKPATH), kept between runs.
#
# Produces, in OUT_DIR:
#   mnemo/                               the app: run mnemo/mnemo
#   mnemo-VERSION-linux-ARCH.tar.gz      mnemo/ + install.sh + uninstall.sh + desktop entry + icon
# and fails (non-zero exit) when the build fails, when the frozen app's `--version` is wrong,
# when its `--self-test` (window offscreen, one embedding, 5 generated tokens) does not exit 0,
# or when `mnemo doctor` resolves a default model file outside the bundle.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:-$ROOT/dist}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=${MNEMO_PYI_WORKPATH:-/tmp/mnemo-pyi-work}
if [[ -z ${PYTHON:-} ]]; then
    if [[ -n ${VIRTUAL_ENV:-} ]]; then PYTHON="$VIRTUAL_ENV/bin/python"; else PYTHON=python3; fi
fi
VERSION=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$ROOT/app/__init__.py")
[[ -n $VERSION ]] || { echo "build_linux.sh: cannot read __version__ from app/__init__.py" >&2; exit 1; }
ARCH=$(uname -m)
NAME="mnemo-$VERSION-linux-$ARCH"
BUNDLE="$OUT/mnemo"

say() { printf '\n== %s\n' "$*"; }
fail() { echo "build_linux.sh: FAILED: $*" >&2; exit 1; }

"$PYTHON" -c "import PyInstaller, app, ui, models, memory_core" 2>/dev/null \
    || fail "$PYTHON lacks PyInstaller or Mnemo; run: $PYTHON -m pip install -e '$ROOT' pyinstaller pyinstaller-hooks-contrib"

say "PyInstaller $("$PYTHON" -m PyInstaller --version) -> $BUNDLE (work: $WORK)"
t0=$(date +%s)
"$PYTHON" -m PyInstaller --noconfirm --log-level WARN \
    --distpath "$OUT" --workpath "$WORK" "$ROOT/packaging/mnemo.spec"
BUILD_S=$(( $(date +%s) - t0 ))
[[ -x $BUNDLE/mnemo ]] || fail "no executable at $BUNDLE/mnemo"

# The spec drops some Qt plugins and libraries; the self-test below only loads the offscreen
# platform plugin, so check statically that every library a kept binary links (ELF NEEDED) is in
# the bundle or on the system. Missing Qt libraries fail the build; missing system libraries are
# listed (the user's desktop provides them, e.g. GTK 3 for the gtk3 platform theme).
say "bundle link check"
if command -v readelf >/dev/null 2>&1; then
    declare -A have=() missing_sys=()
    while IFS= read -r f; do have[$(basename "$f")]=1; done < <(find "$BUNDLE" \( -type f -o \( -type l -xtype f \) \))
    while IFS= read -r lib; do have[$lib]=1; done < <(ldconfig -p 2>/dev/null | awk 'NR>1 {print $1}')
    missing_qt=""
    while IFS= read -r f; do
        while IFS= read -r need; do
            [[ -n ${have[$need]:-} ]] && continue
            case $need in
                libQt6*|libpyside6*|libshiboken6*) missing_qt+="  $need (needed by ${f#"$BUNDLE"/})"$'\n' ;;
                *) [[ -n ${missing_sys[$need]:-} ]] || missing_sys[$need]=${f#"$BUNDLE"/} ;;
            esac
        done < <(readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    done < <(find "$BUNDLE" -type f \( -name '*.so' -o -name '*.so.*' -o -name mnemo \))
    for need in "${!missing_sys[@]}"; do
        echo "system library not on this machine (the desktop provides it): $need, for ${missing_sys[$need]}"
    done
    [[ -z $missing_qt ]] || fail "Qt libraries linked but not bundled:"$'\n'"$missing_qt"
    dangling=$(find "$BUNDLE" -xtype l)
    [[ -z $dangling ]] || fail "dangling symbolic links in the bundle:"$'\n'"$dangling"
    echo "ok: every Qt library that a bundled binary links is in the bundle; no dangling links"
else
    echo "readelf not found (binutils): skipped"
fi

# Run the frozen app as a user would: outside the repository and the venv, with its own empty
# config and data folders, offscreen.
SCRATCH=$(mktemp -d /tmp/mnemo-selftest.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
frozen() {
    (cd "$SCRATCH" && env -u PYTHONPATH -u PYTHONHOME -u VIRTUAL_ENV \
        QT_QPA_PLATFORM=offscreen MNEMO_DATA_DIR="$SCRATCH/data" MNEMO_CONFIG_DIR="$SCRATCH/config" \
        timeout 600 "$BUNDLE/mnemo" "$@")
}

say "mnemo --version"
got=$(frozen --version)
echo "$got"
[[ $got == "mnemo $VERSION" ]] || fail "--version printed '$got', expected 'mnemo $VERSION'"

say "mnemo --self-test --timings (offscreen)"
t0=$(date +%s%3N)
frozen --self-test --timings || fail "the frozen app's --self-test did not exit 0"
t1=$(date +%s%3N)
SELFTEST_S="$(( (t1 - t0) / 1000 )).$(( (t1 - t0) % 1000 / 100 ))"

say "mnemo doctor --json"
frozen doctor --json > "$SCRATCH/doctor.json" || fail "mnemo doctor failed"
cat "$SCRATCH/doctor.json"
# The default models must resolve inside the bundle, never to a site-packages on this machine.
"$PYTHON" - "$SCRATCH/doctor.json" "$BUNDLE" <<'EOF' || fail "doctor's model paths are not all inside the bundle"
import json, sys
from pathlib import Path
report, bundle = json.load(open(sys.argv[1])), Path(sys.argv[2]).resolve()
paths = [report.get("chat model", "")] + report.get("embedder", "").replace("(+ ", "").rstrip(")").split()
errors = [k for k in ("embedder error", "chat model error") if k in report]
outside = [p for p in paths if not p or not Path(p).resolve().is_relative_to(bundle)]
for p in paths:
    print("model file:", p)
sys.exit(1 if errors or outside or report.get("onnxruntime") == "not installed" else 0)
EOF

say "tarball $NAME.tar.gz"
STAGE="$OUT/$NAME"
rm -rf "$STAGE" "$OUT/$NAME.tar.gz"
mkdir -p "$STAGE/share/applications" "$STAGE/share/icons/hicolor/scalable/apps"
cp -al "$BUNDLE" "$STAGE/mnemo" 2>/dev/null || cp -a "$BUNDLE" "$STAGE/mnemo"  # hard links: no second copy
install -m 755 "$ROOT/packaging/linux/install.sh" "$ROOT/packaging/linux/uninstall.sh" "$STAGE/"
install -m 644 "$ROOT/resources/desktop/mnemo.desktop" "$STAGE/share/applications/mnemo.desktop"
install -m 644 "$ROOT/resources/icons/mnemo.svg" "$STAGE/share/icons/hicolor/scalable/apps/mnemo.svg"
echo "$VERSION" > "$STAGE/VERSION"
cat > "$STAGE/README.txt" <<EOF
Mnemo $VERSION for Linux ($ARCH)

  ./install.sh            install for this user: ~/.local/opt/mnemo, ~/.local/bin/mnemo,
                          a menu entry and its icon
  ./install.sh PREFIX     the same under PREFIX (PREFIX/opt/mnemo, PREFIX/bin, PREFIX/share)
  ~/.local/opt/mnemo/uninstall.sh   remove it again (your chats and settings are kept)

Or run it in place without installing: ./mnemo/mnemo
Check an install with: mnemo doctor     (or: mnemo --self-test)
EOF
if command -v pigz >/dev/null 2>&1; then GZ=pigz; else GZ=gzip; fi
tar -C "$OUT" -cf - "$NAME" | $GZ -6 > "$OUT/$NAME.tar.gz"
rm -rf "$STAGE"

# What a user does: unpack, ./install.sh (here into a throwaway HOME), run the installed
# command through its ~/.local/bin link with the default (platformdirs) folders, uninstall.
say "install check: tarball -> install.sh -> ~/.local/bin/mnemo --self-test -> uninstall.sh"
INSTALL_HOME="$SCRATCH/home"
mkdir -p "$INSTALL_HOME" "$SCRATCH/unpack"
tar -C "$SCRATCH/unpack" -xzf "$OUT/$NAME.tar.gz"
as_user() { (cd "$SCRATCH" && env -i PATH="$INSTALL_HOME/.local/bin:/usr/bin:/bin" HOME="$INSTALL_HOME" \
    LANG=C.UTF-8 QT_QPA_PLATFORM=offscreen "$@"); }
as_user bash "$SCRATCH/unpack/$NAME/install.sh" || fail "install.sh failed"
[[ -L $INSTALL_HOME/.local/bin/mnemo && -f $INSTALL_HOME/.local/share/applications/mnemo.desktop \
   && -f $INSTALL_HOME/.local/share/icons/hicolor/scalable/apps/mnemo.svg ]] || fail "install.sh left something out"
if command -v desktop-file-validate >/dev/null 2>&1; then
    desktop-file-validate "$INSTALL_HOME/.local/share/applications/mnemo.desktop" || fail "installed desktop entry is invalid"
fi
as_user timeout 600 mnemo --self-test || fail "the installed mnemo's --self-test did not exit 0"
as_user bash "$INSTALL_HOME/.local/opt/mnemo/uninstall.sh" || fail "uninstall.sh failed"
[[ ! -e $INSTALL_HOME/.local/opt/mnemo && ! -L $INSTALL_HOME/.local/bin/mnemo \
   && ! -e $INSTALL_HOME/.local/share/applications/mnemo.desktop ]] || fail "uninstall.sh left files behind"

say "done"
echo "build time:     ${BUILD_S} s"
echo "bundle:         $(du -sh "$BUNDLE" | cut -f1)  $BUNDLE"
echo "tarball:        $(du -h "$OUT/$NAME.tar.gz" | cut -f1)  $OUT/$NAME.tar.gz"
echo "self-test:      passed in ${SELFTEST_S} s"
