"""Two t2t-train processes on 127.0.0.1 under MultiWorkerMirroredStrategy train and checkpoint."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.mark.slow
def test_two_workers_train_and_checkpoint(tmp_path):
    from t2t_lite import problems
    from t2t_lite.run.checkpoints import checkpoint_step, list_checkpoints
    from t2t_lite.run.run import restore_model

    data_dir, out = str(tmp_path / "data"), str(tmp_path / "run")
    problems.get_problem("algorithmic_reverse").generate_data(
        data_dir, num_symbols=8, max_sequence_length=6, train_size=400, dev_size=40
    )
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    command = [
        sys.executable, "-m", "t2t_lite.bin.t2t_train",
        "--problem=algorithmic_reverse", "--hparams_set=transformer_tiny",
        "--hparams=num_encoder_layers=1,num_decoder_layers=1,batch_size=256",
        f"--data_dir={data_dir}", f"--output_dir={out}",
        "--train_steps=6", "--save_every=3", "--eval_every=6", "--log_every=2",
    ]  # fmt: skip
    processes = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        env = {**os.environ, "TF_CONFIG": json.dumps(tf_config), "TF_CPP_MIN_LOG_LEVEL": "2"}
        processes.append(subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True))
    logs = []
    for process in processes:
        try:
            _, err = process.communicate(timeout=400)
        finally:
            process.kill()
        logs.append(err)
        assert process.returncode == 0, err[-4000:]
    assert "step 6/6" in logs[0] and "step 6/6" in logs[1]
    saved = list_checkpoints(os.path.join(out, "checkpoints"))
    assert [checkpoint_step(p) for p in saved] == [3, 6]
    # Only the chief's checkpoints remain; the other worker's scratch copies are removed.
    assert not [f for f in os.listdir(os.path.join(out, "checkpoints")) if f.startswith(".worker")]
    model, info, path = restore_model(out)
    assert path.endswith("ckpt-6") and info.problem == "algorithmic_reverse"
