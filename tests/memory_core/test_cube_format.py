"""The JSON Schema in resources/ is the format the code writes and reads: a valid Draft 2020-12 schema whose
members are the reader's, whose version is the code's, and that every record of an exported cube meets (checked
here with jsonschema alone, not through the reader)."""

from __future__ import annotations

import json
import zipfile

import jsonschema

from memory_core.cubes.format import FORMAT_VERSION, RECORD_MEMBERS, VECTOR_MEMBERS, schema

from .cubes_support import build_memory, open_memory


def test_the_schema_is_the_codes():
    s = schema()
    jsonschema.Draft202012Validator.check_schema(s)
    assert s["x-members"] == dict(RECORD_MEMBERS + VECTOR_MEMBERS)
    assert s["$defs"]["manifest"]["properties"]["format_version"]["maximum"] == FORMAT_VERSION


def test_an_exported_cube_meets_the_schema(tmp_path, embedder, clock):
    s = open_memory(tmp_path / "m.db", embedder, clock)
    build_memory(s, clock)
    path = s.cubes.export(tmp_path / "c.mnemocube").path
    s.close()
    root = schema()

    def check(definition: str, record: dict) -> None:
        jsonschema.Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": root["$defs"]}).validate(record)

    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        jsonschema.Draft202012Validator(root).validate(manifest)
        assert set(zf.namelist()) == {"manifest.json", *manifest["members"]}
        assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in zf.infolist())
        seen = 0
        for name, definition in root["x-members"].items():
            for line in zf.read(name).decode().splitlines():
                check(definition, json.loads(line))
                seen += 1
    assert seen == sum(m["records"] for m in manifest["members"].values()) > 0
