"""The KRaft cluster ids the stack's Kafka is formatted with: never one the storage tool reads as an option."""

from __future__ import annotations

import base64

from tests.stack.kafka import cluster_id


def test_no_cluster_id_starts_with_a_dash_and_each_is_a_uuid():
    ids = [cluster_id() for _ in range(4000)]  # about 62 would start with "-" drawn naively
    assert not [cluster for cluster in ids if cluster.startswith("-")]
    assert all(len(base64.urlsafe_b64decode(cluster + "==")) == 16 for cluster in ids)
    assert len(set(ids)) == len(ids)
