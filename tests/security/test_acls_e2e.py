"""ACLs end to end on a real kraftpy process, managed with `kraftpy acls`.

A broker without CLUSTER_ACTION is refused (CLUSTER_AUTHORIZATION_FAILED) and nothing is
written; an ACL lets it in; a DENY beats that ALLOW; the ACLs are AccessControlEntryRecords in
the metadata log, so they survive a restart and show in dump-log; a client granted
IDEMPOTENT_WRITE gets a producer id.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kraftpy.tools.broker_sim import BrokerError, BrokerSim
from support.producers import kafka_python_producer_id
from support.security import Pki, SecureServer, secure_server, write_jaas
from support.server import HOST

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]
USERS = {"admin": "admin-Secret-9", "bob": "bob-Secret-2"}
CLUSTER_AUTHORIZATION_FAILED = 31


def acls(srv: SecureServer, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kraftpy.tools", "acls", "--bootstrap-server", srv.sasl_ssl,
         "--command-config", str(config), *args],
        capture_output=True, text=True, timeout=60)


def dump(srv: SecureServer) -> str:
    out = subprocess.run([sys.executable, "-m", "kraftpy.tools", "dump-log", "--skip-noop",
                          str(srv.data_dir)], capture_output=True, text=True, timeout=60)
    return out.stdout


def bob_pid(srv: SecureServer, pki: Pki, transactional_id: str | None = None
            ) -> tuple[int, str]:
    pid, _, error = kafka_python_producer_id(
        srv.sasl_ssl, transactional_id=transactional_id, security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="bob",
        sasl_plain_password=USERS["bob"], ssl_cafile=str(pki.ca_path),
        bootstrap_timeout_ms=3000, max_block_ms=3000)
    return pid, error


def test_acls_gate_brokers_and_clients_and_survive_restart(tmp_path: Path) -> None:
    pki = Pki.create(tmp_path / "pki")
    srv = secure_server(tmp_path / "srv", pki, write_jaas(tmp_path, USERS),
                        {"super.users": "User:admin"})
    admin = tmp_path / "admin.properties"
    admin.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                     f"sasl.username=admin\nsasl.password={USERS['admin']}\n"
                     f"ssl.ca.location={pki.ca_path}\n")
    srv.start()
    try:
        cluster_id = srv.cluster_id()
        # 1. no CLUSTER_ACTION: refused, nothing written
        broker = BrokerSim((HOST, srv.controller_port), broker_id=7, cluster_id=cluster_id)
        with pytest.raises(BrokerError) as refused:
            broker.register()
        assert refused.value.code == CLUSTER_AUTHORIZATION_FAILED
        broker.epoch = 1
        assert broker.allocate_response().error_code == CLUSTER_AUTHORIZATION_FAILED
        assert "Principal = User:ANONYMOUS is denied api key 62" in srv.log_text()

        # 2. an ACL lets brokers from this host in
        added = acls(srv, admin, "add", "--cluster", "--allow-principal", "User:ANONYMOUS",
                     "--allow-host", HOST, "--operation", "ClusterAction",
                     "--operation", "Describe")
        assert added.returncode == 0, added.stderr
        assert added.stdout.count("Added") == 2
        broker.epoch = -1
        broker.register()
        broker.wait_unfenced()
        start, length = broker.allocate()
        assert length == 1000

        # 3. a DENY beats the ALLOW
        denied = acls(srv, admin, "add", "--cluster", "--deny-principal", "User:ANONYMOUS",
                      "--operation", "ClusterAction")
        assert denied.returncode == 0, denied.stderr
        assert broker.allocate_response().error_code == CLUSTER_AUTHORIZATION_FAILED

        # a client: refused until granted IDEMPOTENT_WRITE
        pid, error = bob_pid(srv, pki)
        assert pid == -1 and "ClusterAuthorizationFailed" in error
        assert acls(srv, admin, "add", "--cluster", "--allow-principal", "User:bob",
                    "--operation", "IdempotentWrite").returncode == 0
        pid, error = bob_pid(srv, pki)
        assert pid >= 0 and not error
        # transactional: WRITE on the transactional id (a prefixed ACL here)
        pid, error = bob_pid(srv, pki, "app-1")
        assert pid == -1 and "TransactionalIdAuthorization" in error
        assert acls(srv, admin, "add", "--transactional-id", "app-", "--resource-pattern-type",
                    "prefixed", "--allow-principal", "User:bob", "--operation", "Write"
                    ).returncode == 0
        pid, error = bob_pid(srv, pki, "app-1")
        assert pid >= 0 and not error
        incarnation = broker.incarnation
        broker.close()
    finally:
        assert srv.stop() == 0, srv.log_tail()

    # 4. the ACLs are records in the log ...
    text = dump(srv)
    assert text.count("ACCESS_CONTROL_ENTRY_RECORD") >= 4
    assert text.count("REGISTER_BROKER_RECORD") == 1  # only the authorised registration
    assert text.count("PRODUCER_IDS_RECORD") >= 1

    # ... and survive a restart, still enforced
    srv.start()
    try:
        listed = acls(srv, admin, "list", "--cluster")
        assert listed.returncode == 0, listed.stderr
        assert "principal=User:ANONYMOUS, host=127.0.0.1, operation=CLUSTER_ACTION, " \
               "permissionType=ALLOW" in listed.stdout
        assert "principal=User:ANONYMOUS, host=*, operation=CLUSTER_ACTION, " \
               "permissionType=DENY" in listed.stdout
        assert "principal=User:bob, host=*, operation=IDEMPOTENT_WRITE" in listed.stdout
        broker = BrokerSim((HOST, srv.controller_port), broker_id=7, cluster_id=cluster_id,
                           incarnation=incarnation)  # the same broker process, come back
        broker.register()  # the registration is refused only by the DENY on ClusterAction
    except BrokerError as exc:
        assert exc.code == CLUSTER_AUTHORIZATION_FAILED
        removed = acls(srv, admin, "remove", "--cluster", "--principal", "User:ANONYMOUS",
                       "--permission", "deny")
        assert removed.returncode == 0 and removed.stdout.count("Removed") == 1, removed.stderr
        broker.register()
        broker.wait_unfenced()
        assert broker.allocate()[1] == 1000
        broker.close()
    else:
        pytest.fail("the DENY ACL did not survive the restart")
    finally:
        assert srv.stop() == 0, srv.log_tail()
    assert "REMOVE_ACCESS_CONTROL_ENTRY_RECORD" in dump(srv)


def test_acl_commands_need_authority(tmp_path: Path) -> None:
    pki = Pki.create(tmp_path / "pki")
    srv = secure_server(tmp_path / "srv", pki, write_jaas(tmp_path, USERS))
    bob = tmp_path / "bob.properties"
    bob.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=bob\n"
                   f"sasl.password={USERS['bob']}\nssl.ca.location={pki.ca_path}\n")
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(bob.read_text().replace(USERS["bob"], "nope"))
    srv.start()
    try:
        out = acls(srv, bob, "add", "--topic", "t", "--allow-principal", "User:bob",
                   "--operation", "Write")
        assert out.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in out.stderr
        out = acls(srv, bob, "list")
        assert out.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in out.stderr
        out = acls(srv, wrong, "list")
        assert out.returncode == 2 and "Invalid username or password" in out.stderr
        assert "nope" not in out.stderr
    finally:
        assert srv.stop() == 0, srv.log_tail()
