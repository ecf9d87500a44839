#!/usr/bin/env bash
# Build Mnemo for macOS: PyInstaller Mnemo.app (BUNDLE in packaging/mnemo.spec) -> self-test ->
# drag-to-Applications .dmg (hdiutil).
#
# UNTESTED: written for macOS 12+ with PyInstaller 6, but never run (Mnemo's packaging is built
# and verified on Linux only; see packaging/README.md). hdiutil, codesign and xcrun exist only
# on macOS.
#
#   packaging/macos/build_macos.sh [OUT_DIR]       OUT_DIR defaults to dist/ in the repository
#
# Needs a Python where Mnemo (pip install -e .) and PyInstaller are installed (the active venv,
# or PYTHON=...). The app is built for the architecture of that Python (arm64 or x86_64) and of
# the llama-cpp-python wheel built on this machine (with Metal on Apple silicon).
#
# Optional signing and notarisation (without them the .app is only ad-hoc signed, which
# PyInstaller does itself, and Gatekeeper asks the user to allow it on first start):
#   MNEMO_CODESIGN_IDENTITY="Developer ID Application: NAME (TEAMID)"
#   MNEMO_NOTARY_PROFILE=PROFILE     a `xcrun notarytool store-credentials` keychain profile
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${1:-$ROOT/dist}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=${MNEMO_PYI_WORKPATH:-${TMPDIR:-/tmp}/mnemo-pyi-work}
if [[ -z ${PYTHON:-} ]]; then
    if [[ -n ${VIRTUAL_ENV:-} ]]; then PYTHON="$VIRTUAL_ENV/bin/python"; else PYTHON=python3; fi
fi
VERSION=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$ROOT/app/__init__.py")
[[ -n $VERSION ]] || { echo "build_macos.sh: cannot read __version__ from app/__init__.py" >&2; exit 1; }
ARCH=$(uname -m)
APP="$OUT/Mnemo.app"
DMG="$OUT/mnemo-$VERSION-macos-$ARCH.dmg"

fail() { echo "build_macos.sh: FAILED: $*" >&2; exit 1; }
[[ $(uname -s) == Darwin ]] || fail "this script runs on macOS only (hdiutil, codesign)"
"$PYTHON" -c "import PyInstaller, app, ui" 2>/dev/null \
    || fail "$PYTHON lacks PyInstaller or Mnemo; run: $PYTHON -m pip install -e '$ROOT' pyinstaller pyinstaller-hooks-contrib"

echo "== PyInstaller -> $APP"
t0=$(date +%s)
"$PYTHON" -m PyInstaller --noconfirm --log-level WARN --distpath "$OUT" --workpath "$WORK" "$ROOT/packaging/mnemo.spec"
echo "build time: $(( $(date +%s) - t0 )) s"
[[ -x $APP/Contents/MacOS/mnemo ]] || fail "no executable at $APP/Contents/MacOS/mnemo"

# Optional Developer ID signing with the hardened runtime. Python (ctypes) and llama.cpp need
# executable memory that is not signed, and the wheels' libraries carry other teams' signatures.
if [[ -n ${MNEMO_CODESIGN_IDENTITY:-} ]]; then
    echo "== codesign ($MNEMO_CODESIGN_IDENTITY)"
    ENTITLEMENTS=$(mktemp "${TMPDIR:-/tmp}/mnemo-entitlements.XXXXXX")
    cat > "$ENTITLEMENTS" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
    <key>com.apple.security.cs.allow-unsigned-executable-memory</key><true/>
    <key>com.apple.security.cs.disable-library-validation</key><true/>
</dict>
</plist>
EOF
    # Sign every nested binary first, then the app (codesign --deep is deprecated for this).
    find "$APP/Contents" -type f \( -name '*.dylib' -o -name '*.so' \) -print0 \
        | xargs -0 codesign --force --timestamp --options runtime --entitlements "$ENTITLEMENTS" \
            --sign "$MNEMO_CODESIGN_IDENTITY"
    codesign --force --timestamp --options runtime --entitlements "$ENTITLEMENTS" \
        --sign "$MNEMO_CODESIGN_IDENTITY" "$APP"
    codesign --verify --strict --verbose=2 "$APP"
    rm -f "$ENTITLEMENTS"
fi

# The frozen app's smoke test, offscreen, with its own empty config and data folders.
echo "== Mnemo.app --self-test"
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/mnemo-selftest.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
(cd "$SCRATCH" && env -u PYTHONPATH -u PYTHONHOME QT_QPA_PLATFORM=offscreen \
    MNEMO_DATA_DIR="$SCRATCH/data" MNEMO_CONFIG_DIR="$SCRATCH/config" \
    "$APP/Contents/MacOS/mnemo" --self-test --timings) || fail "the frozen app's --self-test did not exit 0"

echo "== $DMG"
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/mnemo-dmg.XXXXXX")
cp -R "$APP" "$STAGE/"
ln -s /Applications "$STAGE/Applications"
rm -f "$DMG"
hdiutil create -volname "Mnemo $VERSION" -srcfolder "$STAGE" -fs HFS+ -format UDZO -ov "$DMG"
rm -rf "$STAGE"
if [[ -n ${MNEMO_CODESIGN_IDENTITY:-} ]]; then
    codesign --force --timestamp --sign "$MNEMO_CODESIGN_IDENTITY" "$DMG"
fi
if [[ -n ${MNEMO_NOTARY_PROFILE:-} ]]; then
    echo "== notarize"
    xcrun notarytool submit "$DMG" --keychain-profile "$MNEMO_NOTARY_PROFILE" --wait
    xcrun stapler staple "$DMG"
fi

echo "app: $(du -sh "$APP" | cut -f1)  $APP"
echo "dmg: $(du -h "$DMG" | cut -f1)  $DMG"
