"""The shipped manifests say what the seeds say; bad manifests fail with one clear line."""
from __future__ import annotations

import pytest

from ingest.manifest import infer_entry, load_file, load_manifests, load_shipped
from warehouse.errors import TerminalError


def test_shipped_manifests_follow_the_seeds():
    runs = load_shipped()
    hr = runs["20260719_045416_27b_mix4_hr"]
    assert (hr["arm"], hr["wandb_run"]) == ("hr_b", "tree_grpo_27b_mix4_hr_b")
    assert runs["20260720_160605_27b_m4hr24ku6b"]["resumed_from"] == {
        "run": "20260720_041422_27b_m4hr24ku6", "step": 10}
    assert runs["20260720_222757_27b_m4hr24ku6c"]["resumed_from"]["step"] == 15
    for run in ("20260719_160958_27b_m4hr16k", "20260719_221809_27b_m4hr32k",
                "20260720_020550_27b_m4hr24k", "20260720_041422_27b_m4hr24ku6"):
        assert runs[run]["resumed_from"] == {"run": "20260719_045416_27b_mix4_hr", "step": 5}
    assert [r for r, e in runs.items() if e["lost"]] == ["20260719_160958_27b_m4hr16k"]
    for probe in ("probe_bigresults_denoising", "probe_bigresults_textnorm_en",
                  "smoke_hr_denoising", "smoke_hr_textnorm"):
        assert runs[probe]["arm"] is None and runs[probe]["kind"] in ("probe", "smoke")
        assert runs[probe]["model"] == "gpt-5.6-luna"
    assert runs["20260701_231713"]["overrides"] == {"learning_rate": 1e-4}
    assert runs["20260702_041208"]["overrides"] == {"learning_rate": 3e-5}
    assert runs["20260701_223600"]["kind"] == "stress" and runs["20260701_223600"]["arm"] is None
    no_wandb = {"20260701_223600", "20260702_073759", "20260702_221522"}
    q02 = {r for r, e in runs.items() if e["question_id"] == "02-9b-capability-ceiling"}
    assert len(q02) == 8 and {r for r in q02 if runs[r]["wandb_run"] is None} == no_wandb


def test_a_later_manifest_overrides(tmp_path):
    extra = tmp_path / "m.toml"
    extra.write_text('[runs."20260701_231713"]\narm = "tree_grpo_9b_spooky"\nnotes = "mine"\n')
    merged = load_manifests([extra])
    assert merged["20260701_231713"]["notes"] == "mine"
    assert merged["20260701_231713"]["wandb_run"] is None  # an override replaces the entry


@pytest.mark.parametrize("text, fragment", [
    ("[runs.x]\nkind = 'weird'\n", "kind 'weird' is not one of"),
    ("[runs.x]\ncolour = 'red'\n", "unknown key(s) ['colour']"),
    ("[runs.x]\nresumed_from = 'y'\n", "resumed_from must look like"),
    ("[runs.x]\nresumed_from = { run = 'y', step = 'ten' }\n", "step must be an integer"),
    ("runs = [\n", "is not valid TOML"),
    ("region = 'eu'\n", "unknown top-level key(s) ['region']"),
])
def test_bad_manifests(tmp_path, text, fragment):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(TerminalError) as exc:
        load_file(path)
    assert fragment in str(exc.value) and str(path) in str(exc.value)


def test_missing_manifest_file(tmp_path):
    with pytest.raises(TerminalError, match="cannot read manifest"):
        load_file(tmp_path / "nope.toml")


def test_inferred_entries():
    assert infer_entry("probe_x")["kind"] == "probe"
    assert infer_entry("smoke_y")["kind"] == "smoke"
    assert infer_entry("20261129_101010")["kind"] == "unknown"
    assert infer_entry("20261129_101010")["arm"] is None
