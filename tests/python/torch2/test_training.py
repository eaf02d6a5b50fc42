"""Real training state through torch 2.x: a torchrun job of 2 processes
(train_worker.py) trains a DDP model with Adam, AdamW and SGD with
momentum, saves every few steps with torch's get_state_dict and dcp.save,
and is killed with SIGKILL at random points, 30 times; each restart
resumes from the store's newest checkpoint with set_state_dict. The
final model and optimizers equal, bit for bit, those of a run never
killed. Once more as two nodes, killed 5 times: two network namespaces
joined by a veth pair, torchrun --nnodes=2 with its rendezvous on one of
them, the store in a directory both see."""

import os
import random
import selectors
import signal
import subprocess
import sys
import uuid

import pytest
import torch

import rocksdcp
from conftest import HERE, free_port

STEPS, EVERY = 200, 4


def launch(store, final, planners, nnodes=1, node_rank=0, master="127.0.0.1", port=None,
           netns=None, env=None):
    """torchrun of train_worker.py."""
    cmd = [sys.executable, "-m", "torch.distributed.run",
           "--nnodes={}".format(nnodes), "--node-rank={}".format(node_rank),
           "--nproc-per-node={}".format(2 if nnodes == 1 else 1),
           "--master-addr={}".format(master), "--master-port={}".format(port or free_port()),
           os.path.join(HERE, "train_worker.py"), str(store), str(STEPS), str(EVERY), planners,
           str(final)]
    if netns:
        cmd = ["ip", "netns", "exec", netns] + cmd
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1", **(env or {})))


class Job:
    """A training job's launchers, read event by event (the ranks print to
    their launcher's pipe)."""

    def __init__(self, procs):
        self.procs = procs
        self.workers = {}  # rank -> pid of its current process
        self.done = 0
        self.sel = selectors.DefaultSelector()
        for p in procs:
            self.sel.register(p.stdout, selectors.EVENT_READ)
        self.open = len(procs)

    def events(self):
        """Yields each event line's words, until the launchers exit."""
        while self.open:
            for key, _ in self.sel.select():
                line = key.fileobj.readline()
                if not line:
                    self.sel.unregister(key.fileobj)
                    self.open -= 1
                    continue
                words = line.split()
                if len(words) >= 4 and words[0] == "event":
                    self.workers[int(words[1])] = int(words[2])
                    self.done += words[3] == "done"
                    yield words

    def kill(self, pids):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def finish(self):
        """Waits for the launchers; True if every rank ended its training
        (printed "done", after its last save and the final state; what
        torch's gloo backend does when the processes tear down after that,
        an abort at times under load, is not the trainer's)."""
        for p in self.procs:
            p.stderr.read()
            p.wait()
        return self.done >= 2


def run(launch_job, kill=False, rng=None):
    """Runs one launch of the job; with ``kill``, SIGKILLs its launchers
    and every rank at once at a random event. Returns whether it ended."""
    job = Job(launch_job())
    # Events: 2 "resumed" at start, then 2 "step" a step and 4 save events
    # every EVERY steps: a kill within 16 events, 5 steps, leaves most of
    # the STEPS to the last launch.
    kill_at = rng.randint(1, 16) if kill else None
    for seen, _ in enumerate(job.events(), 1):
        if seen == kill_at:
            job.kill(list(job.workers.values()) + [p.pid for p in job.procs])
    return job.finish()


def assert_same_training_state(a, b):
    ref, got = torch.load(a, weights_only=True), torch.load(b, weights_only=True)
    assert ref["model"].keys() == got["model"].keys()
    for k in ref["model"]:
        assert torch.equal(ref["model"][k], got["model"][k]), k
    for r, g in zip(ref["optim"], got["optim"]):
        assert r["param_groups"] == g["param_groups"]
        assert r["state"].keys() == g["state"].keys()
        for p in r["state"]:
            for k, v in r["state"][p].items():
                assert torch.equal(v, g["state"][p][k]), (p, k)


def campaign(tmp_path, kills, launch_job):
    """Runs the trainer uninterrupted, then again killed ``kills`` times at
    random points and restarted until it ends; asserts both end alike."""
    reference = tmp_path / "reference.pt"
    assert run(lambda: launch_job(tmp_path / "ref-store", reference))
    rng = random.Random(int(os.environ.get("ROCKSDCP_TEST_SEED", "37")))
    store, final = tmp_path / "store", tmp_path / "final.pt"
    for k in range(kills):
        assert not run(lambda: launch_job(store, final), kill=True, rng=rng), \
            "the job ended before its kill {} of {}".format(k + 1, kills)
    assert run(lambda: launch_job(store, final))
    assert_same_training_state(reference, final)
    with rocksdcp.Store(store, read_only=True) as s:
        assert s.verify()["ok"]
        assert [c.id for c in s.list()][-1] == "step-{:06d}".format(STEPS)


def test_killed_30_times_resumes_bit_identical(tmp_path):
    campaign(tmp_path, 30, lambda store, final: [launch(store, final, "torch")])


@pytest.fixture
def two_nodes():
    """Two network namespaces joined by a veth pair: (name, address) of
    each. Needs root (CAP_NET_ADMIN), as the CI runs."""
    tag = uuid.uuid4().hex[:6]
    names = ["rdcp{}a".format(tag), "rdcp{}b".format(tag)]
    subnet = "10.{}.{}".format(random.randint(1, 250), random.randint(1, 250))
    nodes = [(names[0], subnet + ".1", "veth" + tag + "a"), (names[1], subnet + ".2", "veth" + tag + "b")]

    def sh(*cmd):
        subprocess.run(cmd, check=True, capture_output=True)

    try:
        for name, _, _ in nodes:
            sh("ip", "netns", "add", name)
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        pytest.skip("cannot make network namespaces here (root and iproute2 needed): {}".format(e))
    try:
        sh("ip", "link", "add", nodes[0][2], "type", "veth", "peer", "name", nodes[1][2])
        for name, addr, dev in nodes:
            sh("ip", "link", "set", dev, "netns", name)
            sh("ip", "netns", "exec", name, "ip", "addr", "add", addr + "/24", "dev", dev)
            sh("ip", "netns", "exec", name, "ip", "link", "set", dev, "up")
            sh("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")
        yield nodes
    finally:
        for name, _, _ in nodes:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


def test_two_nodes_in_network_namespaces_killed_and_resumed(tmp_path, two_nodes):
    (ns0, addr0, dev0), (ns1, _, dev1) = two_nodes

    def job(store, final):
        port = free_port()
        return [launch(store, final, "rocksdcp", nnodes=2, node_rank=r, master=addr0, port=port,
                       netns=ns, env={"GLOO_SOCKET_IFNAME": dev})
                for r, (ns, dev) in enumerate([(ns0, dev0), (ns1, dev1)])]

    campaign(tmp_path, 5, job)
