"""`mnemo models`: lists the GGUF models found in other apps' folders; `--use N` makes Mnemo chat with one."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from models.resolve import default_gguf_path


def mnemo(dirs, home, *args, check=True):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HOME", "HF_HUB_CACHE", "LLAMA_CACHE", "OLLAMA_MODELS")}
    env.update(
        HOME=str(home),
        MNEMO_DATA_DIR=str(dirs["data"]),
        MNEMO_CONFIG_DIR=str(dirs["config"]),
        QT_QPA_PLATFORM="offscreen",
    )
    out = subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, env=env, timeout=300)
    if check:
        assert out.returncode == 0, out.stdout + out.stderr
    return out


def test_lists_the_models_found_and_chats_with_the_one_chosen(mnemo_dirs, tmp_path, server_url):
    home = tmp_path / "home"
    mnemo_dirs["config"].mkdir(parents=True, exist_ok=True)
    (mnemo_dirs["config"] / "settings.json").write_text(json.dumps({"chat": {"server_url": server_url}}))
    empty = mnemo(mnemo_dirs, home, "models").stdout
    assert "No GGUF chat models found" in empty and "LM Studio" in empty
    assert f"{server_url}: smollm2" in empty  # the server in settings answers, and says what it serves

    model = home / ".lmstudio/models/me/Tiny-GGUF/Tiny-Chat-Q4_1.gguf"
    model.parent.mkdir(parents=True)
    os.symlink(default_gguf_path(), model)
    listed = json.loads(mnemo(mnemo_dirs, home, "models", "--json").stdout)
    assert [(m["name"], m["source"], m["architecture"], m["in_use"]) for m in listed["files"]] == [
        ("Tiny-Chat-Q4_1", "LM Studio", "llama", False)
    ]
    assert {"url": server_url, "app": "configured", "models": ["smollm2"]} in listed["servers"]
    assert "Tiny-Chat-Q4_1" in mnemo(mnemo_dirs, home, "models").stdout

    assert "chats with" in mnemo(mnemo_dirs, home, "models", "--use", "1").stdout
    settings = json.loads((mnemo_dirs["config"] / "settings.json").read_text())
    assert settings["chat"]["backend"] == "llama" and settings["chat"]["gguf_path"] == str(model)
    assert json.loads(mnemo(mnemo_dirs, home, "models", "--json").stdout)["files"][0]["in_use"] is True
    reply = json.loads(mnemo(mnemo_dirs, home, "ask", "Hi", "--json").stdout)
    assert reply["status"] == "complete"

    bad = mnemo(mnemo_dirs, home, "models", "--use", "7", check=False)
    assert bad.returncode == 2 and "there is no model 7" in bad.stderr
    junk = tmp_path / "junk.gguf"
    junk.write_text("not a model")
    bad = mnemo(mnemo_dirs, home, "models", "--use", str(junk), check=False)
    assert bad.returncode == 2 and "GGUF" in bad.stderr
    assert json.loads((mnemo_dirs["config"] / "settings.json").read_text())["chat"]["gguf_path"] == str(
        model
    )  # a refused choice changes nothing
