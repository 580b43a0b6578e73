"""An nccl-tests -J file lists one device entry per process (src/util.cu writeDeviceReport under MPI), each process
driving nthreads x ngpus ranks. A 2-process `-g 8` run over two hosts imported as 16 ranks with two host names and no
topology, and fit made it one NVLink domain of 16 (its inter-node curve then stood for NVLink at 8 ranks). Each
process's host now stands for its ranks: a domain per host, as the text path reads its rank lines; a file imported
before is read the same way."""

from __future__ import annotations

import dataclasses
import json

from commbench.costmodel.fit_records import num_domains_of
from commbench.results.importers.nccl_tests import import_file
from commbench.results.records import Measurement, RunHeader
from tests.nccl_tests_inputs import json_file


def _device(rank, host):
    return {"rank": rank, "group": 0, "pid": 100 + rank, "hostname": host, "device": 0, "device_hex": "0000:18:00",
            "device_info": "NVIDIA H100 80GB HBM3"}


def test_a_multi_node_json_run_with_eight_gpus_per_process_has_a_domain_per_host(tmp_path):
    path = tmp_path / "all_reduce.json"
    path.write_text(json_file(devices=[_device(0, "node-0"), _device(8, "node-1")], ngpus=8))
    records = import_file(str(path)).records
    (header,) = [r for r in records if isinstance(r, RunHeader)]
    point = next(r for r in records if isinstance(r, Measurement))
    assert header.world_size == 16 and header.hostnames == ["node-0"] * 8 + ["node-1"] * 8
    assert header.topology["racks"] == [list(range(8)), list(range(8, 16))]
    assert num_domains_of(point, header) == 2
    # imported before: one host name per process, no topology
    old = dataclasses.replace(header, hostnames=["node-0", "node-1"], devices=["H100"] * 2, topology=None)
    assert num_domains_of(point, old) == 2
    one_host = json.loads(json_file(devices=[_device(0, "node-0")], ngpus=8))
    path.write_text(json.dumps(one_host))
    (single,) = [r for r in import_file(str(path)).records if isinstance(r, RunHeader)]
    assert single.world_size == 8 and single.topology is None
