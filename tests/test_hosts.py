"""Host roles and keys for more than one machine (issue 18), without processes: the HOST:PORT
syntax, which roles a joining host may run, the CURVE allow-list (re-read live, refusals counted)
and invitations. The two-host behaviour itself is proven in test_multihost.py."""
from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import zmq.auth

from protocol import curve
from protocol.settings import load_settings, parse_hostport, parse_instances, read_host_file, \
    tcp_endpoint, write_host_file
from services.runtime import daemon

REPO = Path(__file__).resolve().parents[1]


def test_host_port_syntax():
    assert parse_hostport("10.0.0.1:5550") == ("10.0.0.1", 5550)
    assert parse_hostport("[fd00::1]:7000") == ("fd00::1", 7000)
    assert tcp_endpoint("10.0.0.1:5550", "xpub") == "tcp://10.0.0.1:5551"
    assert tcp_endpoint("[fd00::1]:7000", "xsub") == "tcp://[fd00::1]:7000"
    for bad in ("10.0.0.1", ":5550", "host:port", "h:0", "h:70000"):
        with pytest.raises(ValueError, match="HOST:PORT"):
            parse_hostport(bad)


def test_a_joining_host_reaches_the_main_bus_over_tcp_and_saves_its_role(artoo_env):
    s = dataclasses.replace(load_settings(), bus_join="10.0.0.1:5550", host_roles="spawner",
                            host_name="w1")
    assert s.endpoint("xsub") == "tcp://10.0.0.1:5550" and s.endpoint("xpub").endswith(":5551")
    assert curve.needs_curve(s)
    s.ensure_dirs()
    write_host_file(s)
    assert read_host_file(s.home) == {"bus_join": "10.0.0.1:5550", "host_roles": "spawner",
                                      "host_name": "w1"}
    again = load_settings()                   # later commands of this host: the same bus
    assert (again.bus_join, again.host, again.host_roles) == ("10.0.0.1:5550", "w1", "spawner")


def test_which_roles_a_joining_host_may_run(artoo_env):
    s = dataclasses.replace(load_settings(), bus_join="10.0.0.1:5550")
    with pytest.raises(daemon.DaemonError, match="give --roles"):
        daemon.host_roles(s)
    with pytest.raises(daemon.DaemonError, match="memory.*main host"):
        daemon.host_roles(dataclasses.replace(s, host_roles="spawner,memory"))
    # the partitioned roles may join (issue 18) given this host's share of their instances
    with pytest.raises(daemon.DaemonError, match="--instances FIRST/TOTAL"):
        daemon.host_roles(dataclasses.replace(s, host_roles="planner,ggs"))
    assert daemon.host_roles(dataclasses.replace(s, host_roles="planner,ggs,spawner",
                                                 host_instances="2/4")) == \
        ["planner", "ggs", "spawner"]
    with pytest.raises(ValueError, match="FIRST/TOTAL"):
        parse_instances("4/4")
    assert parse_instances("") == (0, 0) and parse_instances("2/4") == (2, 4)
    with pytest.raises(daemon.DaemonError, match="unknown role.*spawnr"):
        daemon.host_roles(dataclasses.replace(s, host_roles="spawnr"))
    assert daemon.host_roles(dataclasses.replace(s, host_roles="spawner")) == ["spawner"]
    s.ensure_dirs()
    conf = daemon.host_conf(s, ["spawner"])
    programs = [p.name for p in daemon.expected_programs({"ARTOO_SUPERVISORD_CONF": str(conf)})]
    assert programs == ["spawner"]


def test_a_hosts_partitioned_instances_are_numbered_from_its_first(artoo_env, monkeypatch):
    """main 0/4 and a worker 2/4, two of each on each host: four instances, numbered apart."""
    from services.runtime.role import instance_from_env
    s = dataclasses.replace(load_settings(), bus_join="10.0.0.1:5550", host_instances="2/4",
                            host_roles="planner,ggs")
    monkeypatch.setenv("ARTOO_INSTANCE", "1")
    monkeypatch.setenv("ARTOO_INSTANCES", "2")
    assert instance_from_env(s) == (3, 4) and instance_from_env(None) == (1, 2)
    s.ensure_dirs()
    env = daemon.daemon_env(s, {"ARTOO_SCALE": "2"})
    assert sorted(daemon.expected_instances(env)) == [("ggs", 2), ("ggs", 3), ("planner", 2),
                                                      ("planner", 3)]
    with pytest.raises(daemon.DaemonError, match="do not fit"):
        daemon.daemon_env(dataclasses.replace(s, host_instances="3/4"), {"ARTOO_SCALE": "2"})


def test_allow_list_is_reread_live_and_counts_refusals(artoo_env, tmp_path):
    s = load_settings()
    s.ensure_dirs()
    curve.ensure_keys(s)
    allowed = curve.AllowList(curve.authorized_dir(s))
    pub, _ = zmq.auth.create_certificates(tmp_path, "w1")
    key = zmq.auth.load_certificate(pub)[0]
    assert not allowed.callback("*", key)
    curve.allow(s, "w1", key.decode())
    assert allowed.callback("*", key)                 # no restart
    assert curve.revoke(s, "w1") and not curve.revoke(s, "w1")
    assert not allowed.callback("*", key)
    st = allowed.stats()
    assert (st["admitted"], st["refused"], st["authorized"]) == (1, 2, ["client"])
    assert st["refused_keys"] == {key[:8].decode(): 2}
    for bad_name, bad_key in (("../x", key.decode()), ("w2", "not-a-key")):
        with pytest.raises(curve.CurveError):
            curve.allow(s, bad_name, bad_key)


def test_an_invitation_carries_the_server_key_and_bus_key(artoo_env, tmp_path):
    main = load_settings()
    main.ensure_dirs()
    invitation = tmp_path / "invite.json"
    curve.write_invitation(main, invitation, b"k" * 32)
    assert invitation.stat().st_mode & 0o077 == 0
    worker = dataclasses.replace(main, curve_dir_override=str(tmp_path / "wcurve"),
                                 bus_join="10.0.0.1:5550")
    with pytest.raises(curve.CurveError, match="artoo keys accept"):
        curve.ensure_keys(worker)
    public, bus_key = curve.accept_invitation(worker, invitation)
    assert bus_key == b"k" * 32 and len(public) == 40
    assert curve.public_key(worker.curve_dir / "server.key") == \
        curve.public_key(main.curve_dir / "server.key")
    curve.ensure_keys(worker)                          # now complete
    invitation.write_text(json.dumps({"server_key": "short"}))
    with pytest.raises(curve.CurveError, match="not a CURVE public key"):
        curve.accept_invitation(worker, invitation)


def test_the_printed_allow_command_works_for_a_key_that_looks_like_an_option(artoo_env, tmp_path):
    """Z85 keys may begin with '-' and hold shell characters ('!', '$', '&'): the hint `keys accept`
    prints must run as printed, and `keys allow` must take such a key without `--`."""
    main = load_settings()
    main.ensure_dirs()
    invitation = tmp_path / "invite.json"
    curve.write_invitation(main, invitation, None)
    worker_env = {**os.environ, "ARTOO_CURVE_DIR": str(tmp_path / "wcurve"),
                  "ARTOO_BUS_JOIN": "10.0.0.1:5550",
                  "ARTOO_HOST_NAME": "w1"}
    cli = [sys.executable, "-m", "services.cli"]
    accepted = subprocess.run([*cli, "keys", "accept", str(invitation)], env=worker_env,
                              cwd=REPO, capture_output=True, text=True, timeout=60)
    assert accepted.returncode == 0, accepted.stderr
    hint = accepted.stdout.split("On the main host: ")[1].strip()
    public = accepted.stdout.split("public key: ")[1].split()[0]
    run = subprocess.run(["bash", "-c", hint.replace("artoo", shlex.join(cli), 1)], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert zmq.auth.load_certificate(curve.authorized_dir(main) / "w1.key")[0].decode() == public
    dashed = next(k for k in iter(lambda: zmq.curve_keypair()[0].decode(), None)
                  if k.startswith("-"))
    run = subprocess.run([*cli, "keys", "allow", "w2", dashed], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "w2 allowed" in run.stdout
