"""MPICH's and Intel MPI's mpiexec (Hydra) give each rank PMI_RANK / PMI_SIZE and MPI_LOCALRANKID / MPI_LOCALNRANKS
(pmodels/mpich src/pm/hydra/proxy/pmip_cb.c at v4.3.2), no torchrun, Open MPI or Slurm variable: commbench read none
of them, so `mpiexec -n 4 commbench bench ...` started four local 2-rank jobs, exit 0 each (probe P6, session 44).
Each rank now joins one job of PMI_SIZE ranks, or is refused in one line where it cannot tell its place."""

from __future__ import annotations

import json

import pytest

from commbench.comm.launch import detect_rank_env
from commbench.errors import CommbenchError
from tests.launched import launch_cli

HYDRA = {"PMI_RANK": "3", "PMI_SIZE": "4", "PMI_FD": "9", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2",
         "MASTER_ADDR": "node0"}
# Hydra under Slurm: srun started one pmi_proxy per node, so the ranks carry that 2-task step's variables
PROXY_STEP = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_LOCALID": "0",
              "SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "2", "SLURM_STEP_NODELIST": "node[0-1]"}


def _place(env):
    rank_env = detect_rank_env(env)
    return rank_env.launcher, rank_env.rank, rank_env.world_size, rank_env.local_rank, rank_env.master_addr


def _refusal(env) -> str:
    with pytest.raises(CommbenchError) as info:
        detect_rank_env(env)
    line = str(info.value)
    assert "\n" not in line, line
    return line


def test_an_mpiexec_rank_is_its_place_in_one_job():
    assert _place(HYDRA) == ("hydra", 3, 4, 1, "node0")
    assert detect_rank_env(HYDRA).master_port == 29500
    assert _place({**HYDRA, "MPI_LOCALRANKID": "0", "PMI_RANK": "0"}) == ("hydra", 0, 4, 0, "node0")
    # every rank on this host (MPI_LOCALNRANKS = PMI_SIZE): rank 0 is here, no MASTER_ADDR needed
    one_host = {**HYDRA, "MPI_LOCALNRANKS": "4", "MASTER_ADDR": ""}
    assert _place(one_host) == ("hydra", 3, 4, 1, "127.0.0.1")
    # HPE Cray PALS's local rank variable where Hydra's is absent
    pals = {k: v for k, v in HYDRA.items() if not k.startswith("MPI_LOCAL")}
    assert _place({**pals, "PMI_LOCAL_RANK": "1"}) == ("hydra", 3, 4, 1, "node0")


def test_without_master_addr_across_hosts_it_is_refused_naming_it():
    line = _refusal({k: v for k, v in HYDRA.items() if k != "MASTER_ADDR"})
    assert "MASTER_ADDR" in line and "PMI_SIZE=4" in line and "-genv MASTER_ADDR" in line, line


def test_pmi_port_mode_without_a_size_is_refused_naming_what_is_missing():
    line = _refusal({"PMI_PORT": "node0:4000", "PMI_ID": "3", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"})
    assert "PMI_ID=3" in line and "PMI_RANK and PMI_SIZE are not" in line and "-pmi-port" in line, line
    # RANK / WORLD_SIZE set per rank by hand are the launch there
    assert detect_rank_env({"PMI_ID": "3", "MPI_LOCALRANKID": "1", "RANK": "3", "WORLD_SIZE": "4",
                            "MASTER_ADDR": "node0"}).rank == 3


def test_inside_slurm_hydras_ranks_are_the_job_not_its_proxies_step():
    assert _place({**PROXY_STEP, **HYDRA}) == ("hydra", 3, 4, 1, "node0")
    line = _refusal({**PROXY_STEP, **{k: v for k, v in HYDRA.items() if k != "MASTER_ADDR"}})
    assert "MASTER_ADDR" in line, line
    # srun --mpi=pmi2 sets PMI_RANK / PMI_SIZE to the step's own: the Slurm launch
    step = {**PROXY_STEP, "SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "4", "SLURM_PROCID": "3", "SLURM_LOCALID": "1"}
    assert _place({**step, "PMI_RANK": "3", "PMI_SIZE": "4"})[:4] == ("slurm", 3, 4, 1)


def test_rank_by_hand_inside_mpiexec_must_be_its_pmi_rank():
    assert _place({**HYDRA, "RANK": "3", "WORLD_SIZE": "4"})[:4] == ("hydra", 3, 4, 1)   # a wrapper's restatement
    line = _refusal({**HYDRA, "RANK": "0", "WORLD_SIZE": "4"})
    assert "RANK=0" in line and "PMI_RANK=3" in line and "mpiexec" in line, line


@pytest.mark.timeout(150)
def test_mpiexec_ranks_run_as_one_job_on_gloo(tmp_path):
    out = tmp_path / "hydra.jsonl"
    results = launch_cli(["bench", "all_reduce", "-b", "8", "-e", "8", "-n", "2", "-w", "1", "-T", "20",
                          "--backend", "gloo", "-O", str(out)], ("hA", "hA"), launcher="hydra", timeout_s=120)
    assert [code for code, _, _ in results] == [0, 0], [output[-400:] for _, _, output in results]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    headers = [r for r in records if r.get("launcher")]
    assert [(h["launcher"], h["world_size"]) for h in headers] == [("hydra", 2)], headers


def test_tuning_combinations_under_mpiexec_move_off_the_launchs_port():
    from commbench.comm.nccl_tuning import TuningCombo
    from commbench.sweep.combos import combo_environ

    from commbench.sweep.combos import under_outside_launcher

    assert under_outside_launcher({**HYDRA, "MASTER_PORT": "29600"})   # its combinations take CombinationPorts' ports
    assert combo_environ(TuningCombo(), {**HYDRA, "MASTER_PORT": "29600"}, port=40123)["MASTER_PORT"] == "40123"
