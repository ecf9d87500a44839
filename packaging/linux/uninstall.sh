#!/usr/bin/env bash
# Remove a Mnemo install made by install.sh.
#
#   PREFIX/opt/mnemo/uninstall.sh         (the copy install.sh leaves in the install)
#   ./uninstall.sh [PREFIX]               (from the release folder; PREFIX defaults to ~/.local)
#
# Removes exactly what install.sh recorded in PREFIX/opt/mnemo/.mnemo-install: the app folder,
# the PREFIX/bin/mnemo link (only while it still points into the app folder), the desktop entry
# and the icon. Your chats and settings (~/.local/share/Mnemo, ~/.config/Mnemo, or the folders
# MNEMO_DATA_DIR / MNEMO_CONFIG_DIR name) are kept; delete them yourself to forget everything.
set -euo pipefail

die() { echo "uninstall.sh: $*" >&2; exit 1; }

# Everything runs inside main(), which bash reads whole before running it: this script may be
# deleting its own folder.
main() {
    local here dest marker
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    [[ $# -le 1 ]] || die "usage: uninstall.sh [PREFIX]   (default: ~/.local)"
    if [[ $# -eq 0 && -f $here/.mnemo-install ]]; then
        dest=$here                            # run from inside the install
    else
        local prefix=${1:-${HOME:?HOME is not set}/.local}
        [[ $prefix == /* ]] || prefix="$PWD/$prefix"
        dest="${prefix%/}/opt/mnemo"
    fi
    marker="$dest/.mnemo-install"
    [[ -f $marker ]] || die "no Mnemo install found at $dest (missing $marker)"

    local key value link="" desktop="" icon=""
    while IFS='=' read -r key value; do
        case $key in
            link) link=$value ;;
            desktop) desktop=$value ;;
            icon) icon=$value ;;
        esac
    done < "$marker"

    if [[ -n $link && -L $link ]]; then
        local target
        target=$(readlink "$link")
        if [[ $target == "$dest/mnemo" ]]; then
            rm -f "$link"
        else
            echo "uninstall.sh: kept $link (it now points to $target, not to this install)" >&2
        fi
    fi
    [[ -z $desktop ]] || rm -f "$desktop"
    [[ -z $icon ]] || rm -f "$icon"
    if [[ -n $desktop ]] && command -v update-desktop-database >/dev/null 2>&1; then
        update-desktop-database -q "$(dirname "$desktop")" 2>/dev/null || true
    fi
    rm -rf "$dest"
    echo "Mnemo removed from $dest (your chats and settings were kept)."
}

main "$@"
