"""docs/training.md's SLURM script and Kubernetes manifest: valid, complete and consistent (there is
no SLURM controller or Kubernetes cluster here; tests/train/test_multi_worker.py runs t2t-train
from their environments on 127.0.0.1)."""

from __future__ import annotations

import os
import re
import subprocess

import yaml

DOC = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "training.md"
)


def _blocks(language: str) -> list[str]:
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def test_the_sbatch_script_is_bash_that_runs_t2t_train_on_slurm(tmp_path):
    [script] = [b for b in _blocks("bash") if "#SBATCH" in b]
    path = tmp_path / "train.sbatch"
    path.write_text(script)
    subprocess.run(["bash", "-n", str(path)], check=True)
    assert script.startswith("#!/bin/bash\n")
    command = " ".join(script.replace("\\\n", " ").split())
    assert "srun t2t-train --cluster=slurm " in command
    assert re.search(r"#SBATCH --signal=TERM@\d+", script)  # a save before the time limit


def test_the_manifest_is_an_indexed_job_with_its_headless_service():
    [manifest] = _blocks("yaml")
    service, job = yaml.safe_load_all(manifest)
    assert (service["apiVersion"], service["kind"]) == ("v1", "Service")
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["selector"]
    assert service["spec"]["selector"] == {"job-name": job["metadata"]["name"]}
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"]
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] in ("OnFailure", "Never")  # what a Job allows
    assert pod["subdomain"] == service["metadata"]["name"]
    [container] = pod["containers"]
    assert container["name"] and container["image"]
    port = container["ports"][0]["containerPort"]
    assert port == service["spec"]["ports"][0]["port"]
    flags = dict(arg.split("=", 1) for arg in container["command"][1:])
    assert container["command"][0] == "t2t-train" and flags["--cluster"] == "kubernetes"
    expected = [
        f"{job['metadata']['name']}-{i}.{service['metadata']['name']}:{port}"
        for i in range(spec["completions"])
    ]
    assert flags["--worker_hosts"].split(",") == expected
    mounts = {m["name"] for m in container["volumeMounts"]}
    assert mounts <= {v["name"] for v in pod["volumes"]}
    assert flags["--output_dir"].startswith(container["volumeMounts"][0]["mountPath"])
