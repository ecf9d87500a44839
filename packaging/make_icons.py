"""Render resources/icons/mnemo.svg into the raster icons installers need.

    python packaging/make_icons.py OUT_DIR

writes OUT_DIR/mnemo.ico (Windows: 16-256 px), OUT_DIR/mnemo.icns (macOS: 16-1024 px) and
OUT_DIR/mnemo-256.png: QtSvg (PySide6 is already a dependency) renders PNGs, and the ico/icns
containers are written by hand (no Pillow, ImageMagick or iconutil needed). Runs offscreen. Called by
packaging/mnemo.spec on Windows and macOS; Linux uses the SVG itself.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SVG = ROOT / "resources" / "icons" / "mnemo.svg"
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
ICNS_SIZES = (16, 32, 64, 128, 256, 512, 1024)


def render(renderer, size: int):
    from PySide6.QtCore import QRectF, Qt
    from PySide6.QtGui import QImage, QPainter

    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, 0, size, size))
    painter.end()
    return image


def png_bytes(image) -> bytes:
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice

    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buf, "PNG"):
        raise SystemExit("make_icons: PNG encoding failed")
    buf.close()
    return bytes(data)


def ico(pngs: dict[int, bytes]) -> bytes:
    """An .ico holding PNG images (supported since Windows Vista): ICONDIR, ICONDIRENTRYs, data."""
    header = struct.pack("<HHH", 0, 1, len(pngs))
    entries, blobs = b"", b""
    offset = 6 + 16 * len(pngs)
    for size, png in sorted(pngs.items()):
        dim = 0 if size >= 256 else size  # 0 means 256
        entries += struct.pack("<BBBBHHII", dim, dim, 0, 0, 1, 32, len(png), offset + len(blobs))
        blobs += png
    return header + entries + blobs


# Apple's icns element types that hold PNG data, by pixel size (the @2x types reuse sizes).
ICNS_TYPES = {
    16: [b"icp4"],
    32: [b"icp5", b"ic11"],
    64: [b"icp6", b"ic12"],
    128: [b"ic07"],
    256: [b"ic08", b"ic13"],
    512: [b"ic09", b"ic14"],
    1024: [b"ic10"],
}


def icns(pngs: dict[int, bytes]) -> bytes:
    """An .icns: 'icns' + total length, then (type, 8 + length, PNG) for each element."""
    body = b""
    for size, png in sorted(pngs.items()):
        for ostype in ICNS_TYPES[size]:
            body += ostype + struct.pack(">I", 8 + len(png)) + png
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtSvg import QSvgRenderer

    app = QGuiApplication.instance() or QGuiApplication(["make_icons"])  # noqa: F841 (plugins need it)
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    renderer = QSvgRenderer(str(SVG))
    if not renderer.isValid():
        raise SystemExit(f"make_icons: cannot read {SVG}")
    pngs = {size: png_bytes(render(renderer, size)) for size in sorted(set(ICO_SIZES) | set(ICNS_SIZES))}
    # The containers are written here (a few lines each) rather than through Qt's ico/icns image
    # plugins: Qt's ico writer stores one image per file, and the icns plugin is not in every build.
    (out / "mnemo.ico").write_bytes(ico({s: pngs[s] for s in ICO_SIZES}))
    (out / "mnemo.icns").write_bytes(icns({s: pngs[s] for s in ICNS_SIZES}))
    (out / "mnemo-256.png").write_bytes(pngs[256])
    print(f"make_icons: wrote mnemo.ico, mnemo.icns, mnemo-256.png to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
