"""Every property kraftpy reads, once: its name, the default kraftpy runs with, Kafka's
default, where it is read and what it does here.

The code that reads a property takes its default from here (`default(name)`), the
configuration reference (docs/configuration.md) is generated from here
(`python -m kraftpy.tools.reference docs/`), and a test fails when a module reads a
property-shaped name this table does not hold, or when the page is stale. Names and meanings
are Kafka's; Kafka's defaults are checked against `kafka_configs.BROKER_CONFIGS` (Kafka 4.1's
own table) wherever Kafka has the key.
"""

from __future__ import annotations

from dataclasses import dataclass

# Where a property is set: a node's server.properties (`kraftpy serve --config`, and each
# `--override`), or the client settings of the operator tools (`--command-config`).
SERVER, CLIENT = "server", "client"

GROUPS = {
    "node": "Node, listeners and data directory",
    "quorum": "Raft quorum (controller.quorum.*)",
    "log": "Metadata log and snapshots",
    "brokers": "Brokers, producer ids and transactions",
    "topics": "Topics and replication",
    "network": "Requests and connections",
    "security": "TLS, SASL, ACLs and quotas",
    "metrics": "Metrics",
    "client": "Client settings of the operator tools (--command-config)",
}


@dataclass(frozen=True)
class Property:
    name: str
    group: str
    default: str | None  # what kraftpy runs with when unset (None: no value)
    doc: str
    read_by: str  # the module that reads it (the one that holds its rules)
    kafka_default: str | None = None  # Kafka's, where it differs from kraftpy's (else same)
    kafka: bool = True  # a Kafka property (False: kraftpy's own, or librdkafka's name)
    per_listener: bool = False  # also read as listener.name.<listener>.<name>
    scope: str = SERVER


_P = Property
_CFG = "controller/config.py"
_RAFT = "controller/raft/config.py"
_SEC = "controller/security/layer.py"
_TLS = "controller/security/tls.py"
_QUOTAS = "controller/security/quotas.py"
_AUTH = "controller/security/authorizer.py"
_CLIENT = "tools/kafka_connection.py"

PROPERTIES: tuple[Property, ...] = (
    # --- node -----------------------------------------------------------------------------
    _P("process.roles", "node", None,
       "`broker,controller` (a combined node: a client listener besides the CONTROLLER one) "
       "or `controller`. Required; the embedded default is `broker,controller`.", _CFG),
    _P("node.id", "node", None,
       "This node's id: a voter's id in the quorum, and the id it registers with. Required; "
       "the embedded default is 1.", _CFG),
    _P("listeners", "node", None,
       "`NAME://host:port,...`; port 0 asks the system for one. Every listener not named in "
       "`controller.listener.names` is a client listener. The embedded default is "
       "`PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093`.", _CFG,
       kafka_default="PLAINTEXT://:9092"),
    _P("advertised.listeners", "node", None,
       "What Metadata, DescribeCluster and the voter set tell others to connect to, per "
       "listener; a listener not named here advertises its bound address.", _CFG),
    _P("controller.listener.names", "node", None,
       "The listeners that serve the controller APIs (brokers, raft); required, each must be "
       "in `listeners`.", _CFG),
    _P("listener.security.protocol.map", "node",
       "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
       "SASL_SSL:SASL_SSL",
       "`LISTENER:PROTOCOL,...`: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. A listener named "
       "like a protocol needs no entry.", _CFG,
       kafka_default="SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:"
       "SASL_PLAINTEXT"),
    _P("metadata.log.dir", "node", None,
       "The data directory: `meta.properties`, `__cluster_metadata-0`, `__transaction_state-N`."
       " The embedded default is `./kraftpy-data`.", _CFG),
    _P("log.dirs", "node", None,
       "Used for the data directory (its first entry) when `metadata.log.dir` is not set, as "
       "Kafka does.", _CFG),
    _P("broker.rack", "node", None,
       "This node's rack, registered for it as a broker (rack-aware placement).",
       "controller/recovery.py"),
    _P("cluster.id", "node", None,
       "First start of an unformatted directory only: the cluster id to format it with (a new "
       "one when unset). `kraftpy storage format --cluster-id` does the same.",
       "controller/recovery.py", kafka=False),
    _P("metadata.version", "node", None,
       "First start of an unformatted directory only: the metadata.version feature level "
       "(an int) to bootstrap; unset, Kafka 4.1's latest production level (27, 4.1-IV1).",
       "controller/recovery.py", kafka=False),
    # --- quorum ---------------------------------------------------------------------------
    _P("controller.quorum.voters", "quorum", "",
       "A static voter set (kraft.version 0), `id@host:port,...`; this node must be one of "
       "them. With neither this nor `controller.quorum.bootstrap.servers`, the node is the "
       "lone voter of its own quorum.", "controller/quorum.py"),
    _P("controller.quorum.bootstrap.servers", "quorum", "",
       "A dynamic quorum (KIP-853, kraft.version 1): `host:port,...` of controllers to find "
       "the leader through; the voters are those the log records.",
       "controller/raft/dynamic.py"),
    _P("controller.quorum.election.timeout.ms", "quorum", "1000",
       "How long a follower hears nothing from a leader before it stands for election.", _RAFT),
    _P("controller.quorum.fetch.timeout.ms", "quorum", "2000",
       "How long a voter fetches without a leader's answer before it starts an election; a "
       "leader that hears from no majority for 1.5 times this resigns.", _RAFT),
    _P("controller.quorum.election.backoff.max.ms", "quorum", "1000",
       "The longest random back-off before a new election after a failed one.", _RAFT),
    _P("controller.quorum.append.linger.ms", "quorum", "25",
       "How long the leader lets appends gather into one batch before it writes it; 0 writes "
       "what was appended since its last poll.", _RAFT),
    _P("controller.quorum.request.timeout.ms", "quorum", "2000",
       "How long a raft request waits for its answer.", _RAFT),
    _P("controller.quorum.retry.backoff.ms", "quorum", "20",
       "The wait before a failed raft request is sent again.", _RAFT),
    # --- log ------------------------------------------------------------------------------
    _P("metadata.log.segment.bytes", "log", "1073741824",
       "A metadata log segment rolls at this size (at least 1024 here, so tests can roll "
       "small segments; Kafka's minimum is 8 MiB).", _CFG),
    _P("metadata.log.segment.ms", "log", "604800000",
       "A metadata log segment rolls at this age.", _CFG),
    _P("metadata.log.max.record.bytes.between.snapshots", "log", "20971520",
       "A snapshot is taken once this many bytes of records were committed since the last.",
       _CFG),
    _P("metadata.log.max.snapshot.interval.ms", "log", "3600000",
       "A snapshot is taken once this long has passed since the last with records committed "
       "meanwhile; 0 turns the time trigger off.", _CFG),
    _P("metadata.max.retention.bytes", "log", None,
       "Older snapshots and the segments they need are kept until they pass this many bytes "
       "(-1: no limit). Unset with `metadata.max.retention.ms` unset too, each new snapshot "
       "deletes the segments below it and all but one older snapshot; set alone, the other "
       "takes Kafka's default.", _CFG, kafka_default="104857600"),
    _P("metadata.max.retention.ms", "log", None,
       "As `metadata.max.retention.bytes`, by age (-1: no limit).", _CFG,
       kafka_default="604800000"),
    _P("metadata.max.idle.interval.ms", "log", "500",
       "The leader writes a NoOpRecord this often when nothing else is written, so fetchers see "
       "the log move; 0 writes none.", _CFG),
    # --- brokers --------------------------------------------------------------------------
    _P("broker.session.timeout.ms", "brokers", "9000",
       "A broker without a heartbeat for this long is fenced (its leaderships move).", _CFG),
    _P("broker.heartbeat.interval.ms", "brokers", "2000",
       "The heartbeat interval brokers are told to keep.", _CFG),
    _P("producer.id.allocation.quota.per.broker", "brokers", "0",
       "AllocateProducerIds per broker per second (a token bucket of Kafka's quota shape); "
       "over it a broker gets THROTTLING_QUOTA_EXCEEDED with a throttle time. 0: unlimited.",
       _CFG, kafka=False),
    _P("transaction.max.timeout.ms", "brokers", "900000",
       "The longest transaction timeout a transactional InitProducerId may ask for.", _CFG),
    _P("transaction.state.log.num.partitions", "brokers", "50",
       "Partitions of `__transaction_state` when this node creates it.", _CFG),
    _P("transaction.state.log.min.isr", "brokers", "2",
       "`min.insync.replicas` of `__transaction_state` when this node creates it, capped at "
       "the one replica it places.", _CFG),
    _P("transaction.state.log.segment.bytes", "brokers", "104857600",
       "`segment.bytes` of `__transaction_state` when this node creates it.", _CFG),
    # --- topics ---------------------------------------------------------------------------
    _P("num.partitions", "topics", "1",
       "Partitions of a topic created without a count (-1).", "controller/topic_control.py"),
    _P("default.replication.factor", "topics", "1",
       "Replicas of a topic created without a replication factor (-1).",
       "controller/topic_control.py"),
    _P("delete.topic.enable", "topics", "true",
       "false: DeleteTopics is refused (TOPIC_DELETION_DISABLED).",
       "controller/topic_control.py"),
    _P("min.insync.replicas", "topics", "1",
       "The cluster-level value written when ELR is turned on, and the broker-level default "
       "behind each topic's own.", "controller/recovery.py"),
    _P("auto.leader.rebalance.enable", "topics", "true",
       "Give partitions back to their preferred leader every "
       "`leader.imbalance.check.interval.seconds`.", "controller/replication_control.py"),
    _P("leader.imbalance.check.interval.seconds", "topics", "300",
       "How often the preferred-leader election runs.", "controller/replication_control.py"),
    _P("unclean.leader.election.interval.ms", "topics", "300000",
       "How often partitions without an in-sync leader are checked for an unclean election "
       "(where `unclean.leader.election.enable` allows it).",
       "controller/replication_control.py", kafka=False),
    # --- network --------------------------------------------------------------------------
    _P("socket.request.max.bytes", "network", "104857600",
       "A request frame larger than this closes its connection, checked on the size prefix.",
       _CFG),
    _P("queued.max.request.bytes", "network", "-1",
       "Bytes of large request frames being read or handled at once across connections; a "
       "frame past it waits unread in its socket. -1 (or <= 0): no bound; else at least "
       "`socket.request.max.bytes`.", _CFG),
    _P("connections.max.idle.ms", "network", "600000",
       "A connection idle this long is closed.", _CFG),
    _P("kraftpy.quick.answers", "network", "true",
       "`true`: an idempotent InitProducerId whose bytes (but its correlation id) were "
       "handled before is answered from the receive buffer with the next id, exactly as "
       "the full path answers it; `false`: every request through the full path (to measure "
       "it, or to rule the shortcut out).", "controller/node.py", kafka=False),
    _P("max.connections", "network", "2147483647",
       "Client-listener connections at once; one more is closed at once (the CONTROLLER "
       "listener stays reachable for brokers).", _QUOTAS),
    _P("max.connections.per.ip", "network", "2147483647",
       "Connections at once from one address, on every listener.", _QUOTAS),
    _P("max.connections.per.ip.overrides", "network", "",
       "`host:count,...`: other limits for some addresses.", _QUOTAS),
    # --- security -------------------------------------------------------------------------
    _P("ssl.certificate.location", "security", None,
       "The listener's certificate (PEM, chain allowed); required on an SSL or SASL_SSL "
       "listener.", _TLS, kafka=False, per_listener=True),
    _P("ssl.key.location", "security", None,
       "The certificate's private key (PEM).", _TLS, kafka=False, per_listener=True),
    _P("ssl.key.password", "security", None,
       "The key's password, when it is encrypted.", _TLS, per_listener=True),
    _P("ssl.ca.location", "security", None,
       "CA certificates (PEM) to verify client certificates with.", _TLS, kafka=False,
       per_listener=True),
    _P("ssl.client.auth", "security", "none",
       "`required`, `requested` or `none`: whether clients must present a certificate.", _TLS,
       per_listener=True),
    _P("ssl.principal.mapping.rules", "security", "DEFAULT",
       "Kafka's `RULE:pattern/replacement/[LU]` rules that shorten a certificate subject into "
       "a principal name.", _TLS, per_listener=True),
    _P("sasl.enabled.mechanisms", "security", "SCRAM-SHA-256,SCRAM-SHA-512",
       "SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN (kraftpy has no GSSAPI).", _SEC,
       kafka_default="GSSAPI", per_listener=True),
    _P("sasl.jaas.config", "security", None,
       "The JAAS options inline: each `user_<name>=\"<password>\"` is a user.", _SEC,
       per_listener=True),
    _P("java.security.auth.login.config", "security", None,
       "A JAAS file (as the JVM system property names it): each `user_<name>=\"<password>\"` "
       "option of its section is a user, for PLAIN and both SCRAMs.", _SEC, kafka=False),
    _P("sasl.jaas.section", "security", "KafkaServer",
       "The section of that JAAS file to read.", _SEC, kafka=False),
    _P("sasl.server.max.receive.size", "security", "524288",
       "The largest frame accepted before authentication.", _SEC),
    _P("authorizer.class.name", "security", "",
       "`org.apache.kafka.metadata.authorizer.StandardAuthorizer` turns ACLs on; empty: off.",
       _AUTH),
    _P("super.users", "security", "",
       "`User:a;User:b`: principals every ACL check lets through.", _AUTH, kafka_default=""),
    _P("allow.everyone.if.no.acl.found", "security", "false",
       "true: a resource without any ACL is open to everyone.", _AUTH,
       kafka_default="false"),
    _P("quota.request.rate.per.principal", "security", None,
       "Requests per second per principal; over it answers carry ThrottleTimeMs and the "
       "connection is not read until it is paid (KIP-219). Unset: no quota.", _QUOTAS,
       kafka=False),
    _P("quota.request.rate.overrides", "security", "",
       "`User:alice=100;User:bob=5`: other rates for some principals.", _QUOTAS, kafka=False),
    _P("quota.window.num", "security", "11",
       "Samples a quota's rate is measured over.", _QUOTAS),
    _P("quota.window.size.seconds", "security", "1",
       "The length of each sample.", _QUOTAS),
    # --- metrics --------------------------------------------------------------------------
    _P("kraftpy.metrics.listener", "metrics", "",
       "`http://HOST:PORT`: an HTTP listener with `/metrics` (Prometheus) and `/ready`. "
       "Empty: off.", "controller/metrics_http.py", kafka=False),
    # --- the tools' client settings ---------------------------------------------------------
    _P("security.protocol", "client", "PLAINTEXT",
       "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.", _CLIENT, scope=CLIENT),
    _P("sasl.mechanism", "client", None,
       "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (`sasl.mechanisms`, librdkafka's name, too).",
       _CLIENT, scope=CLIENT),
    _P("sasl.username", "client", None, "The SASL user.", _CLIENT, kafka=False, scope=CLIENT),
    _P("sasl.password", "client", None, "Its password.", _CLIENT, kafka=False, scope=CLIENT),
    _P("ssl.ca.location", "client", None,
       "CA certificates (PEM) to verify the server with; unset: the system's.", _CLIENT,
       kafka=False, scope=CLIENT),
    _P("ssl.certificate.location", "client", None,
       "A client certificate (PEM), for a listener that asks for one.", _CLIENT, kafka=False,
       scope=CLIENT),
    _P("ssl.key.location", "client", None, "Its private key (PEM).", _CLIENT, kafka=False,
       scope=CLIENT),
    _P("ssl.key.password", "client", None, "The key's password.", _CLIENT, scope=CLIENT),
    _P("ssl.endpoint.identification.algorithm", "client", "https",
       "`https` checks the server's name against its certificate; `none` does not.", _CLIENT,
       scope=CLIENT),
)

SERVER_PROPERTIES = {p.name: p for p in PROPERTIES if p.scope == SERVER}
CLIENT_PROPERTIES = {p.name: p for p in PROPERTIES if p.scope == CLIENT}


def default(name: str) -> str:
    """The default kraftpy runs a server property with (KeyError for an unknown name or one
    without a default: a reader must not invent one)."""
    value = SERVER_PROPERTIES[name].default
    if value is None:
        raise KeyError(f"{name} has no default")
    return value
