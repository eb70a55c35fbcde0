"""Real client producers reduced to what the tests look at: the producer id and epoch they got.

    pid, epoch, error = kafka_python_producer_id("127.0.0.1:9092", transactional_id="t")
    pid, epoch, errors = confluent_producer_id({"bootstrap.servers": "127.0.0.1:9092"})

Both wait at most `wait_s` for the id and give up early on an error the client calls fatal,
so a refused client costs no more than a granted one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any


def kafka_python_producer_id(bootstrap: str, *, transactional_id: str | None = None,
                             wait_s: float = 6.0, **config: Any) -> tuple[int, int, str]:
    """(producer id or -1, epoch, the error kafka-python reports or '')."""
    from kafka import KafkaProducer

    kind = {"transactional_id": transactional_id} if transactional_id else {
        "enable_idempotence": True}
    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap, **kind, **config)
    except Exception as exc:  # the client cannot bootstrap at all
        return -1, -1, f"{type(exc).__name__}: {exc}"
    try:
        if transactional_id:
            try:
                producer.init_transactions()
            except Exception as exc:
                return -1, -1, f"{type(exc).__name__}: {exc}"
        tm = producer._transaction_manager
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if tm.producer_id_and_epoch.producer_id >= 0 or tm.has_fatal_error():
                break
            time.sleep(0.02)
        pe = tm.producer_id_and_epoch
        return pe.producer_id, pe.epoch, str(tm._last_error or "")
    finally:
        producer.close(timeout=3)


def confluent_producer_id(conf: Mapping[str, Any], *, transactional_id: str | None = None,
                          wait_s: float = 6.0) -> tuple[int, int, list[tuple[str, bool, str]]]:
    """(producer id or -1, epoch, [(error name, fatal, text)] librdkafka reported).

    The id is read from librdkafka's statistics (`eos`), the only place it shows it.
    """
    from confluent_kafka import KafkaError, KafkaException, Producer

    got: dict = {}
    errors: list[tuple[str, bool, str]] = []

    def stats(text: str) -> None:
        eos = json.loads(text).get("eos", {})
        if eos.get("producer_id", -1) >= 0:
            got.update(eos)

    def on_error(err: KafkaError) -> None:
        errors.append((err.name(), err.fatal(), err.str()))

    kind = {"transactional.id": transactional_id} if transactional_id else {
        "enable.idempotence": True}
    producer = Producer({**kind, "statistics.interval.ms": 50, "stats_cb": stats,
                         "error_cb": on_error, "log_level": 0, **conf})
    deadline = time.monotonic() + wait_s
    try:
        if transactional_id:
            producer.init_transactions(wait_s)
        while time.monotonic() < deadline and not got and not any(
                fatal or name == "_AUTHENTICATION" for name, fatal, _ in errors):
            producer.poll(0.02)
        producer.flush(1)
    except KafkaException as exc:  # a fatal error is raised from a call
        errors.append((exc.args[0].name(), True, exc.args[0].str()))
    return got.get("producer_id", -1), got.get("producer_epoch", -1), errors


def read_committed(bootstrap: str, topic: str, expected: int, *, wait_s: float = 90.0
                   ) -> list[str]:
    """The values a kafka-python read_committed consumer reads from `topic` from the start,
    until it has `expected` of them, finds nothing new for 15 s, or `wait_s` runs out."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             isolation_level="read_committed", consumer_timeout_ms=15_000,
                             enable_auto_commit=False)
    try:
        values = []
        deadline = time.monotonic() + wait_s
        for message in consumer:
            values.append(message.value.decode())
            if len(values) >= expected or time.monotonic() > deadline:
                break
        return values
    finally:
        consumer.close()
