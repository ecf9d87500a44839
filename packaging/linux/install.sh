#!/usr/bin/env bash
# Install Mnemo from this unpacked release folder, for the current user (no root needed).
#
#   ./install.sh [PREFIX]        PREFIX defaults to ~/.local
#
# Puts the app in PREFIX/opt/mnemo, links PREFIX/bin/mnemo to it, and installs the desktop entry
# and icon into the data folder (~/.local/share, or $XDG_DATA_HOME, for the default prefix;
# PREFIX/share otherwise): applications/mnemo.desktop and icons/hicolor/scalable/apps/mnemo.svg.
# Installing again over an earlier install replaces it. PREFIX/opt/mnemo/uninstall.sh undoes it.
# Your chats and settings (~/.local/share/Mnemo, ~/.config/Mnemo) are not touched.
set -euo pipefail

die() { echo "install.sh: $*" >&2; exit 1; }

# Quote a path for the Exec key of a .desktop file (Desktop Entry spec, "The Exec key"): paths
# with reserved characters go in double quotes with \ " ` $ backslash-escaped, and then every
# backslash is doubled again because Exec is also an escaped string value.
desktop_exec_quote() {
    local p=$1
    if [[ $p =~ ^[A-Za-z0-9_/.+,:@%=-]+$ ]]; then
        printf '%s' "$p"
        return
    fi
    p=${p//\\/\\\\}; p=${p//\"/\\\"}; p=${p//\`/\\\`}; p=${p//\$/\\\$}
    p=${p//\\/\\\\}
    printf '"%s"' "$p"
}

main() {
    local here prefix dest bin share default_prefix
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    [[ $# -le 1 ]] || die "usage: ./install.sh [PREFIX]   (default: ~/.local)"
    [[ -n ${HOME:-} ]] || die "HOME is not set"
    default_prefix="$HOME/.local"
    prefix=${1:-$default_prefix}
    [[ $prefix == /* ]] || prefix="$PWD/$prefix"
    prefix=${prefix%/}
    [[ -x $here/mnemo/mnemo ]] || die "no Mnemo bundle next to this script ($here/mnemo/mnemo is missing)"
    [[ -f $here/share/applications/mnemo.desktop ]] || die "missing $here/share/applications/mnemo.desktop"
    [[ -f $here/share/icons/hicolor/scalable/apps/mnemo.svg ]] || die "missing the icon in $here/share/icons"

    dest="$prefix/opt/mnemo"
    bin="$prefix/bin"
    if [[ $prefix == "$default_prefix" ]]; then
        share=${XDG_DATA_HOME:-$HOME/.local/share}
    else
        share="$prefix/share"
    fi
    local link="$bin/mnemo"
    local desktop="$share/applications/mnemo.desktop"
    local icon="$share/icons/hicolor/scalable/apps/mnemo.svg"

    # Refuse to clobber what is not ours: another program's folder, or a `mnemo` command that
    # is not our link (e.g. the console script of `pip install --user mnemo`).
    if [[ -e $dest && ! -f $dest/.mnemo-install ]]; then
        die "$dest exists and is not a Mnemo install made by install.sh; move it away first"
    fi
    if [[ -e $link || -L $link ]] && [[ ! -L $link ]]; then
        die "$link exists and is not a link (a pip-installed mnemo?); remove it first"
    fi

    mkdir -p "$prefix/opt" "$bin" "$share/applications" "$share/icons/hicolor/scalable/apps"

    # Copy next to the destination, then swap, so a failed copy leaves the old install working.
    local staging="$dest.new.$$"
    rm -rf "$staging"
    cp -a "$here/mnemo" "$staging"
    cp "$here/uninstall.sh" "$staging/uninstall.sh"
    chmod +x "$staging/uninstall.sh"
    {
        echo "# Written by Mnemo's install.sh; read by uninstall.sh. Do not edit."
        echo "version=$(cat "$here/VERSION" 2>/dev/null || echo unknown)"
        echo "dest=$dest"
        echo "link=$link"
        echo "desktop=$desktop"
        echo "icon=$icon"
    } > "$staging/.mnemo-install"
    rm -rf "$dest"
    mv "$staging" "$dest"

    ln -sfn "$dest/mnemo" "$link"

    # Icon by name when it lands in the user's own data folder (found through the icon theme);
    # by absolute path for any other prefix, which may not be on XDG_DATA_DIRS.
    local icon_value=mnemo
    [[ $share == "${XDG_DATA_HOME:-$HOME/.local/share}" ]] || icon_value=$icon
    install -m 644 "$here/share/icons/hicolor/scalable/apps/mnemo.svg" "$icon"
    local exec_value
    exec_value=$(desktop_exec_quote "$dest/mnemo")
    local tmp_desktop="$desktop.tmp.$$"
    while IFS= read -r line || [[ -n $line ]]; do
        case $line in
            Exec=*) printf 'Exec=%s\n' "$exec_value" ;;
            TryExec=*) printf 'TryExec=%s\n' "$dest/mnemo" ;;
            Icon=*) printf 'Icon=%s\n' "$icon_value" ;;
            *) printf '%s\n' "$line" ;;
        esac
    done < "$here/share/applications/mnemo.desktop" > "$tmp_desktop"
    chmod 644 "$tmp_desktop"
    mv "$tmp_desktop" "$desktop"

    # Refresh the menu and icon caches where the tools exist (harmless when they do not).
    if command -v update-desktop-database >/dev/null 2>&1; then
        update-desktop-database -q "$share/applications" 2>/dev/null || true
    fi
    touch "$share/icons/hicolor" 2>/dev/null || true
    if command -v gtk-update-icon-cache >/dev/null 2>&1 && [[ -f $share/icons/hicolor/index.theme ]]; then
        gtk-update-icon-cache -q -t "$share/icons/hicolor" 2>/dev/null || true
    fi

    echo "Mnemo installed in $dest"
    echo "  command:       $link"
    echo "  desktop entry: $desktop"
    echo "  uninstall:     $dest/uninstall.sh"
    case ":${PATH:-}:" in
        *":$bin:"*) ;;
        *) echo "note: $bin is not on your PATH; add it, or start Mnemo from the application menu." ;;
    esac
}

main "$@"
