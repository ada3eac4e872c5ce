"""What tests share that is not a fixture: builders of records, bundles, inventories and jobs, the
sandbox's class and what tests do on it, the local launchers, the SSH server, strict JSON. A test module
imports from here (or from ``tests.fixtures``, the captured data), never from another test module or a
conftest; fixtures stay in the conftest.py files (tests/test_layering.py checks the imports)."""
