"""t2t-export under faults (issue 17): it falls back from a damaged newest checkpoint as
t2t-decode does, refuses with the files named when none is readable, and removes the temporary
folder a killed export left."""

from __future__ import annotations

import os
import time

from command_helpers import command
from decoding_helpers import add_truncated_newer_checkpoint, write_tiny_run

from t2t_lite.serve import versions


def _export(output_dir, export_dir):
    return command(
        "t2t_export", f"--output_dir={output_dir}", f"--export_dir={export_dir}", "--beam_size=1"
    )


def test_export_falls_back_to_an_intact_checkpoint_and_refuses_when_none_is(tmp_path):
    output_dir, _, _ = write_tiny_run(tmp_path, max_positions=16)
    folder = output_dir / "checkpoints"
    bad = add_truncated_newer_checkpoint(folder)
    done = _export(output_dir, tmp_path / "models")
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"checkpoint {folder}/ckpt-2 is unreadable: {bad} is damaged or truncated" in done.stderr
    assert f"restored {folder}/ckpt-1 " in done.stderr
    assert os.path.isfile(tmp_path / "models" / "1" / "saved_model.pb")
    with open(folder / "ckpt-1.data-00000-of-00001", "r+b") as f:  # zeroed: a checksum error
        f.write(b"\0" * os.path.getsize(folder / "ckpt-1.data-00000-of-00001"))
    done = _export(output_dir, tmp_path / "models")
    assert done.returncode != 0
    assert (
        f"no readable checkpoint in {output_dir}/final or {output_dir}/averaged or {folder}: {bad}"
        in done.stderr
    )
    assert f"{folder}/ckpt-1.data-00000-of-00001 is damaged or truncated" in done.stderr
    assert os.listdir(tmp_path / "models") == ["1"]


def test_a_killed_exports_temporary_folder_is_removed_by_the_next(tmp_path):
    export_dir = tmp_path / "models"
    stale = export_dir / ".tmp-export-1-abcd1234"
    (stale / "variables").mkdir(parents=True)
    (stale / "saved_model.pb").write_text("half")
    old = time.time() - 3600
    for path in (stale / "variables", stale / "saved_model.pb", stale):
        os.utime(path, (old, old))
    running = export_dir / ".tmp-export-2-efgh5678"  # another export's, still being written
    running.mkdir()
    os.utime(running, (time.time() + 60, time.time() + 60))

    def writer(folder):
        with open(os.path.join(folder, "saved_model.pb"), "w") as f:
            f.write("whole")

    assert versions.write_version(str(export_dir), 1, writer) == str(export_dir / "1")
    assert sorted(os.listdir(export_dir)) == [".tmp-export-2-efgh5678", "1"]
