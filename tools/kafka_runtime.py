"""Apache Kafka 4.1 itself, from its Maven Central jars: for `kraftpy cluster` and the tests.

There is no tarball. `kafka/pom.xml` (installed with the package) pins Kafka's runtime: the
broker and controller (`kafka_2.13`), its tools, the metadata shell, the Java client and a
log4j 2 binding; `ensure_jars(libs)` has Maven copy them into `libs` when they are missing or
were copied for another pom, so a plain `pip install .` is enough to run real brokers once
Java and Maven are on the PATH. Maven keeps its downloads in `~/.m2`: the first copy takes a
minute on a fresh machine, later ones seconds.

A copy never empties a directory someone may be running Kafka from: Maven fills a directory
inside it, its jars are renamed into place one by one (a jar of the same name is the same
artifact), and only jars the pom no longer names are removed. A lock keeps two copies apart.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from importlib import resources
from pathlib import Path

KAFKA_VERSION = "4.1.0"
POM = Path(str(resources.files("kraftpy.tools") / "kafka" / "pom.xml"))
# Written into a libs directory once a copy for this pom is whole: the pom's digest.
MARKER = ".kraftpy-pom-sha256"
# Where `kraftpy cluster` keeps the jars unless told otherwise.
LIBS_ENV = "KRAFTPY_KAFKA_LIBS"

# Heap and JIT for a laptop or a 2-core machine that runs several nodes at once: a broker
# starts in seconds and holds a test cluster's load (Kafka's own default is a 1 GiB heap).
NODE_JVM_OPTS = ("-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 "-Djava.awt.headless=true")
TOOL_JVM_OPTS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")

# The main class of each of Kafka's scripts (bin/<script>.sh), by script and by tool name.
SCRIPTS = {
    "kafka-storage": ("StorageTool", "kafka.tools.StorageTool"),
    "kafka-dump-log": ("DumpLogSegments", "kafka.tools.DumpLogSegments"),
    "kafka-metadata-shell": ("MetadataShell", "org.apache.kafka.shell.MetadataShell"),
    "kafka-metadata-quorum": ("MetadataQuorumCommand",
                              "org.apache.kafka.tools.MetadataQuorumCommand"),
    "kafka-topics": ("TopicCommand", "org.apache.kafka.tools.TopicCommand"),
    "kafka-features": ("FeatureCommand", "org.apache.kafka.tools.FeatureCommand"),
    "kafka-transactions": ("TransactionsCommand", "org.apache.kafka.tools.TransactionsCommand"),
    "kafka-acls": ("AclCommand", "org.apache.kafka.tools.AclCommand"),
    "kafka-configs": ("ConfigCommand", "kafka.admin.ConfigCommand"),
    "kafka-cluster": ("ClusterTool", "org.apache.kafka.tools.ClusterTool"),
    "kafka-broker-api-versions": ("BrokerApiVersionsCommand",
                                  "org.apache.kafka.tools.BrokerApiVersionsCommand"),
    "kafka-console-producer": ("ConsoleProducer", "org.apache.kafka.tools.ConsoleProducer"),
    "kafka-console-consumer": ("ConsoleConsumer",
                               "org.apache.kafka.tools.consumer.ConsoleConsumer"),
    "kafka-consumer-groups": ("ConsumerGroupCommand",
                              "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"),
    "kafka-reassign-partitions": ("ReassignPartitionsCommand",
                                  "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"),
    "kafka-leader-election": ("LeaderElectionCommand",
                              "org.apache.kafka.tools.LeaderElectionCommand"),
}
TOOLS = {tool: main for tool, main in SCRIPTS.values()}

# A node's log: one line per event on stdout (the caller sends it to a file).
NODE_LOG4J2 = """\
Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: org.apache.kafka.common.config.AbstractConfig
        level: WARN
      - name: org.apache.kafka.common.utils.AppInfoParser
        level: WARN
"""
# Tools print their results on stdout; their log lines go to stderr, as bin/*.sh arranges.
TOOL_LOG4J2 = NODE_LOG4J2.replace("level: INFO", "level: WARN", 1).replace(
    "      name: STDOUT\n", "      name: STDOUT\n      target: SYSTEM_ERR\n", 1)


class KafkaUnavailable(RuntimeError):
    """Java or Maven is missing, or Maven could not copy Kafka's jars; the message says which."""


def default_libs() -> Path:
    """`$KRAFTPY_KAFKA_LIBS`, else `$XDG_CACHE_HOME/kraftpy/kafka-<version>/libs`
    (`~/.cache/...` without it)."""
    if os.environ.get(LIBS_ENV):
        return Path(os.environ[LIBS_ENV])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "kraftpy" / f"kafka-{KAFKA_VERSION}" / "libs"


def pom_digest() -> str:
    return hashlib.sha256(POM.read_bytes()).hexdigest()


def fetch_command(libs: Path) -> list[str]:
    """The Maven command that copies the pom's jars into `libs`."""
    return ["mvn", "-B", "-q", "-f", str(POM), "dependency:copy-dependencies",
            f"-Dkafka.libs={Path(libs).resolve()}"]


def require(*programs: str) -> None:
    """KafkaUnavailable naming the first program missing from the PATH."""
    for program in programs:
        if shutil.which(program) is None:
            raise KafkaUnavailable(
                f"Apache Kafka {KAFKA_VERSION} needs `{program}` on the PATH: a JDK 17 or 21 "
                "and Maven (Debian/Ubuntu: apt-get install openjdk-17-jdk-headless maven; "
                "macOS: brew install openjdk@17 maven)")


def jars_ready(libs: Path) -> bool:
    marker = Path(libs) / MARKER
    return marker.exists() and marker.read_text().strip() == pom_digest()


def ensure_jars(libs: Path, announce: Callable[[str], None] = lambda _: None,
                timeout: float = 900.0) -> Path:
    """`libs`, holding this pom's jars (copied by Maven first when needed)."""
    libs = Path(libs)
    if jars_ready(libs):
        return libs
    require("java", "mvn")
    target = libs.resolve()
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if jars_ready(libs):  # another process copied them while this one waited
            return libs
        announce(f"copying Apache Kafka {KAFKA_VERSION}'s jars from Maven Central into {target} "
                 "(once; about a minute on a fresh machine, seconds once ~/.m2 holds them)")
        with tempfile.TemporaryDirectory(dir=target, prefix=".fetch-") as tmp:
            try:
                done = subprocess.run(fetch_command(Path(tmp)), capture_output=True, text=True,
                                      timeout=timeout)
            except subprocess.TimeoutExpired:
                raise KafkaUnavailable(f"Maven did not copy Kafka's jars within {timeout:.0f} s"
                                       ) from None
            if done.returncode != 0:
                raise KafkaUnavailable(f"Maven could not copy Kafka's jars (exit "
                                       f"{done.returncode}):\n{done.stdout[-3000:]}"
                                       f"{done.stderr[-3000:]}")
            fetched = {p.name for p in Path(tmp).glob("*.jar")}
            for name in sorted(fetched):
                os.replace(Path(tmp) / name, target / name)
        for stale in target.glob("*.jar"):
            if stale.name not in fetched:
                stale.unlink()
        (target / MARKER).write_text(pom_digest() + "\n")
    return libs


def java_command(libs: Path, main_class: str, *args: str,
                 jvm_opts: Sequence[str] = TOOL_JVM_OPTS, log4j_config: Path | None = None,
                 extra_classpath: Iterable[Path] = ()) -> list[str]:
    """`java ... -cp <libs>/* <main class> <args>`: how Kafka's scripts run each program."""
    cp = os.pathsep.join([*(str(p) for p in extra_classpath), str(Path(libs).absolute() / "*")])
    opts = list(jvm_opts)
    if log4j_config is not None:
        opts.append(f"-Dlog4j2.configurationFile={log4j_config}")
    return ["java", *opts, "-cp", cp, main_class, *args]


def write_scripts(bin_dir: Path, libs: Path, log4j_config: Path) -> list[Path]:
    """Kafka's `bin/kafka-*.sh` for these jars (`kafka-topics.sh` runs TopicCommand, ...), so
    Kafka's tools run without a Kafka tarball. Each honours KAFKA_OPTS as Kafka's scripts do."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for script, (_tool, main_class) in SCRIPTS.items():
        path = bin_dir / f"{script}.sh"
        opts = " ".join(TOOL_JVM_OPTS)
        path.write_text(
            "#!/bin/sh\n"
            f"# Apache Kafka {KAFKA_VERSION}'s {script}.sh, from the jars in {libs}.\n"
            f"exec java {opts} -Dlog4j2.configurationFile='{log4j_config}' $KAFKA_OPTS "
            f"-cp '{Path(libs).resolve()}/*' {main_class} \"$@\"\n")
        path.chmod(0o755)
        written.append(path)
    return written
