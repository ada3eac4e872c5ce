"""The payload's ResNet-50 benchmark script, loaded once as the image runs it, for the tests of its model,
its options, its real-data input and its MFU."""

from __future__ import annotations

from tests.helpers.payloads import load_payload

bench = load_payload("resnet50_bench")
