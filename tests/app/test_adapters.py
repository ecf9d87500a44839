"""Parametric memory in the app: the adapter registry (app.parametric.adapters) on a real data folder, each chat's
choice kept and put on the real bundled model before its turn, adapters that do not fit left off with
one line, and `mnemo memory adapters` end to end."""

from __future__ import annotations

import json

import pytest

from app.chat.session import ChatSession
from app.parametric import adapters as ad
from models.lora import AdapterError
from tests.adapter_files import bundled_adapter, wrong_shape_adapter
from tests.app.test_cli_commands import mnemo


def test_registry_copies_lists_and_forgets(tmp_path):
    reg = ad.AdapterRegistry(tmp_path / "data")
    src = bundled_adapter(tmp_path / "style.gguf")
    one = reg.add(src, scale=0.5)
    two = reg.add(src)
    assert (one.name, two.name) == ("style", "style-2")  # a name is never taken twice
    src.unlink()  # the registry keeps its own copy
    assert reg.path(one).is_file() and reg.path(one).stat().st_size == one.size
    assert one.base_model == "SmolLM2 135M" and one.rank == 4 and len(one.sha256) == 64
    assert one.source.endswith("style.gguf")
    assert oct(reg.folder.stat().st_mode & 0o777) == "0o700"
    reg.remove("style-2")
    assert [r.name for r in ad.AdapterRegistry(tmp_path / "data").records()] == ["style"]
    with pytest.raises(ad.AdapterRegistryError, match="no adapter named 'nope'"):
        reg.remove("nope")
    with pytest.raises(ad.AdapterRegistryError, match="scale 9"):
        reg.set_scale("style", 9)


def test_not_an_adapter_is_refused_at_add(tmp_path):
    bad = tmp_path / "notes.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 8)
    reg = ad.AdapterRegistry(tmp_path / "data")
    with pytest.raises(AdapterError, match=r"^notes\.gguf: "):
        reg.add(bad)
    assert reg.records() == []


def test_chat_choice_persists_and_defaults(tmp_path):
    reg = ad.AdapterRegistry(tmp_path / "data")
    reg.add(bundled_adapter(tmp_path / "a.gguf"))
    reg.add(bundled_adapter(tmp_path / "b.gguf", seed=5), new_chats=True)
    assert [r.name for r in reg.chosen(7)[0]] == ["b"] and not reg.chosen(7)[1]  # new-chat default
    reg.toggle(7, "a", True)
    reg.toggle(7, "b", False)
    again = ad.AdapterRegistry(tmp_path / "data")  # as after a restart
    assert [r.name for r in again.chosen(7)[0]] == ["a"] and again.chosen(7)[1]
    assert [r.name for r in again.chosen(8)[0]] == ["b"]
    again.remove("a")
    assert again.chosen(7) == ([], True)  # the chat's choice stays its own: none


def test_turns_use_their_chats_adapters(tmp_path, chat_model):
    reg = ad.AdapterRegistry(tmp_path / "data")
    reg.add(bundled_adapter(tmp_path / "strong.gguf", std=0.3))
    reg.add(wrong_shape_adapter(tmp_path / "wide.gguf"))
    ad.attach(chat_model, tmp_path / "data")
    question = [{"role": "user", "content": "What is the capital of France?"}]

    def reply() -> str:
        return "".join(chat_model.stream(question, max_tokens=16, temperature=0.0))

    try:
        reg.use(1, ["strong"])
        reg.use(2, [])
        reg.use(3, ["wide"])
        ChatSession(2).agent(None, chat_model)
        plain = reply()
        ChatSession(1).agent(None, chat_model)
        assert [p.rsplit("/", 1)[-1] for p, _ in chat_model.adapters] == ["strong.gguf"]
        assert reply() != plain
        assert ad.apply_for_chat(chat_model, 3) == [
            next(r.problem for r in ad.rows(reg, chat_model.model_path) if r.name == "wide")
        ]
        assert chat_model.adapters == ()  # left off, one line said why
        assert reply() == plain
    finally:
        chat_model.set_adapters([])
        ad._registries.pop(chat_model, None)


def test_distilled_adapter_replaces_the_last_and_forgetting_drops_it(tmp_path):
    reg = ad.AdapterRegistry(tmp_path / "data")
    first = ad.keep_distilled(reg, bundled_adapter(tmp_path / "m1.gguf"), 1000.0, 10)
    second = ad.keep_distilled(reg, bundled_adapter(tmp_path / "m2.gguf", seed=9), 2000.0, 12)
    names = [r.name for r in reg.records()]
    assert second.name in names and (first.name not in names or first.name == second.name)
    assert second.new_chats and second.source.startswith(ad.DISTILLED)
    assert ad.drop_forgotten(reg, [(1500.0, 2500.0)]) == [second.name]
    assert reg.records() == []


def test_cli_adapters(mnemo_dirs, tmp_path):
    style = bundled_adapter(tmp_path / "style.gguf")
    wide = wrong_shape_adapter(tmp_path / "wide.gguf")
    out = mnemo(mnemo_dirs, "memory", "adapters", "add", str(style), "--scale", "0.5")
    assert "Added adapter style (for SmolLM2 135M" in out.stdout
    out = mnemo(mnemo_dirs, "memory", "adapters", "add", str(wide))
    assert "cannot be used with the current model: wide.gguf: made for SmolLM2 360M" in out.stdout
    rows = json.loads(mnemo(mnemo_dirs, "memory", "adapters", "list", "--json").stdout)
    assert [(r["name"], r["scale"], r["problem"] is None) for r in rows] == [("style", 0.5, True), ("wide", 1.0, False)]
    mnemo(mnemo_dirs, "ask", "Hello there", "--json")  # makes chat 1
    assert "Chat 1 uses style." in mnemo(mnemo_dirs, "memory", "adapters", "use", "style", "--chat", "1").stdout
    bad = mnemo(mnemo_dirs, "memory", "adapters", "use", "wide", "--chat", "1", check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "made for SmolLM2 360M" in bad.stderr
    rows = json.loads(mnemo(mnemo_dirs, "memory", "adapters", "list", "--chat", "1", "--json").stdout)
    assert [r["name"] for r in rows if r["in_chat"]] == ["style"]
    mnemo(mnemo_dirs, "memory", "adapters", "remove", "wide")
    missing = mnemo(mnemo_dirs, "memory", "adapters", "add", str(tmp_path / "none.gguf"), check=False)
    assert missing.returncode == 2 and "none.gguf: no such file" in missing.stderr


def test_adapters_travel_in_a_cube(tmp_path, store):
    home = ad.AdapterRegistry(tmp_path / "home")
    home.add(bundled_adapter(tmp_path / "style.gguf"), scale=0.75)
    cube = tmp_path / "memory.mnemocube"
    store.cubes.export(cube, extras=ad.cube_extras(home))
    away = ad.AdapterRegistry(tmp_path / "away")
    added, problems = ad.adapters_from_cube(away, cube)
    assert problems == [] and [(r.name, r.scale, r.source) for r in added] == [("style", 0.75, "cube memory.mnemocube")]
    assert away.get("style").sha256 == home.get("style").sha256
    assert ad.adapters_from_cube(away, cube) == ([], [])  # a second import adds nothing
    plan = store.cubes.plan(cube)  # the memory import still checks the cube whole
    assert plan is not None


def test_a_tampered_adapter_in_a_cube_is_refused(tmp_path, store):
    from memory_core.cubes import CubeError

    home = ad.AdapterRegistry(tmp_path / "home")
    home.add(bundled_adapter(tmp_path / "style.gguf"))
    cube = tmp_path / "memory.mnemocube"
    store.cubes.export(cube, extras=ad.cube_extras(home))
    data = bytearray(cube.read_bytes())
    at = data.find(b"ffn_down.weight.lora_b") + 2000  # inside the stored adapter's tensors
    data[at] ^= 0xFF
    cube.write_bytes(bytes(data))
    away = ad.AdapterRegistry(tmp_path / "away")
    added, problems = ad.adapters_from_cube(away, cube)
    assert added == [] and len(problems) == 1 and "adapter-1.gguf: damaged (Bad CRC-32" in problems[0]
    assert away.records() == [] and not list((tmp_path / "away").glob("adapters/*.gguf"))
    with pytest.raises(CubeError, match="damaged"):
        store.cubes.plan(cube)  # the memory import refuses the whole cube


def test_cube_names_an_optional_member_only_under_its_prefixes(tmp_path, store):
    from memory_core.cubes import CubeError

    with pytest.raises(CubeError, match="parametric/"):
        store.cubes.export(tmp_path / "x.mnemocube", extras=[("../evil.gguf", b"x")])
    assert not (tmp_path / "x.mnemocube").exists()
